# Reads only variables and locals (local.cluster_id, local.endpoint, local.ca_certificate and
# local.gpu_cluster_id from main.tf; local.gpus from checks.tf), so the tests evaluate it with a fake
# cluster and no provider.

output "cluster_id" {
  description = "ID of the Managed Kubernetes cluster (mk8scluster-...)."
  value       = local.cluster_id
}

output "gpu_cluster_id" {
  description = "ID of the InfiniBand GPU cluster the nodes joined; empty when there is none."
  value       = local.gpu_cluster_id
}

output "gpus_per_node" {
  description = "nvidia.com/gpu each node of the GPU node group offers."
  value       = local.gpus
}

# No secret in it: kubectl gets a short-lived IAM token for each call, from NEBIUS_IAM_TOKEN when it is set
# (as for Terraform), else from the nebius CLI's profile. The driver writes it to STATE/kubeconfig.
output "kubeconfig" {
  description = "Kubeconfig (YAML) for the cluster's public endpoint."
  value = yamlencode({
    apiVersion      = "v1"
    kind            = "Config"
    current-context = var.name_prefix
    clusters = [{
      name = var.name_prefix
      cluster = {
        server                     = startswith(local.endpoint, "https://") ? local.endpoint : "https://${local.endpoint}"
        certificate-authority-data = base64encode(local.ca_certificate)
      }
    }]
    users = [{
      name = var.name_prefix
      user = {
        exec = {
          apiVersion = "client.authentication.k8s.io/v1beta1"
          command    = "sh"
          args = ["-c", join(" ", [
            "printf '{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":\"ExecCredential\",",
            "\"status\":{\"token\":\"%s\"}}'",
            "\"$${NEBIUS_IAM_TOKEN:-$(nebius iam get-access-token)}\"",
          ])]
          interactiveMode = "Never"
        }
      }
    }]
    contexts = [{
      name    = var.name_prefix
      context = { cluster = var.name_prefix, user = var.name_prefix }
    }]
  })
}

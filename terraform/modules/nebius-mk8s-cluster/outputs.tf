# Reads the spec and main.tf's locals (cluster_id, endpoint, ca_certificate, gpu_cluster_id) only, so the
# tests evaluate it over a fake cluster.

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
  value       = module.base.spec.gpus
}

# No secret in it: each kubectl call gets a short-lived IAM token from NEBIUS_IAM_TOKEN when it is set (as
# Terraform does), else from the nebius CLI, with the profile PAV_NEBIUS_PROFILE names (a service
# account's; the driver refuses service-account mode without it). The driver writes it to STATE/kubeconfig.
output "kubeconfig" {
  description = "Kubeconfig (YAML) for the cluster's public endpoint."
  value = yamlencode({
    apiVersion      = "v1"
    kind            = "Config"
    current-context = local.v.name_prefix
    clusters = [{
      name = local.v.name_prefix
      cluster = {
        server                     = startswith(local.endpoint, "https://") ? local.endpoint : "https://${local.endpoint}"
        certificate-authority-data = base64encode(local.ca_certificate)
      }
    }]
    users = [{
      name = local.v.name_prefix
      user = {
        exec = {
          apiVersion = "client.authentication.k8s.io/v1beta1"
          command    = "sh"
          args = ["-c", join(" ", [
            "printf '{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":\"ExecCredential\",",
            "\"status\":{\"token\":\"%s\"}}'",
            "\"$${NEBIUS_IAM_TOKEN:-$(nebius iam get-access-token $${PAV_NEBIUS_PROFILE:+--profile \"$PAV_NEBIUS_PROFILE\"})}\"",
          ])]
          interactiveMode = "Never"
        }
      }
    }]
    contexts = [{
      name    = local.v.name_prefix
      context = { cluster = local.v.name_prefix, user = local.v.name_prefix }
    }]
  })
}

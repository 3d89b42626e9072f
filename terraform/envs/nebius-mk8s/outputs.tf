output "kubeconfig" {
  description = "Kubeconfig of the cluster; the driver writes it to STATE/kubeconfig for kubectl and the role."
  value       = module.cluster.kubeconfig
}

output "cluster" {
  description = "IDs of the Managed Kubernetes cluster and its GPU cluster, and nvidia.com/gpu per GPU node."
  value = {
    id             = module.cluster.cluster_id
    gpu_cluster_id = module.cluster.gpu_cluster_id
    gpus_per_node  = module.cluster.gpus_per_node
  }
}

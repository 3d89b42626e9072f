output "kubeconfig" {
  description = "Kubeconfig of the cluster; the driver writes it to STATE/kubeconfig for kubectl and the role."
  value       = module.cluster.kubeconfig
}

output "cluster_id" {
  description = "ID of the Managed Kubernetes cluster."
  value       = module.cluster.cluster_id
}

output "gpus_per_node" {
  description = "nvidia.com/gpu per node of the GPU node group."
  value       = module.cluster.gpus_per_node
}

output "gpu_cluster_id" {
  description = "ID of the InfiniBand GPU cluster; empty when there is none."
  value       = module.cluster.gpu_cluster_id
}

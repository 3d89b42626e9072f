output "hosts" {
  description = "Map of host name to {name, public_ip, private_ip, ssh_user, ssh_port, gpus, fabric}."
  value       = module.cluster.hosts
}

output "gpu_cluster_id" {
  description = "ID of the InfiniBand GPU cluster; empty when there is none."
  value       = module.cluster.gpu_cluster_id
}

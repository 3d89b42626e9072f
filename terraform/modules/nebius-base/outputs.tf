output "spec" {
  description = "The nebius-spec module's outputs: values (defaults filled in), labels, gpus, fabric, with_cluster, ..."
  value       = module.spec
}

output "subnet_id" {
  description = "The subnet the nodes' interfaces go into."
  value       = local.create_subnet ? nebius_vpc_v1_subnet.this[0].id : local.v.subnet_id
}

output "gpu_cluster" {
  description = "The gpu_cluster block of a node ({id}), or null when the nodes join none."
  value       = module.spec.with_cluster ? { id = nebius_compute_v1_gpu_cluster.this[0].id } : null
}

# The node sees it as a virtiofs device named by its mount tag; cloud-init mounts it.
output "filesystems" {
  description = "The filesystems list of a node (VM or node-group template): one read-write attachment, or none."
  value = local.filesystem_tag == "" ? [] : [{
    attach_mode         = "READ_WRITE"
    mount_tag           = local.filesystem_tag
    existing_filesystem = { id = local.create_filesystem ? nebius_compute_v1_filesystem.this[0].id : local.v.shared_filesystem_id }
  }]
}

output "user_data" {
  description = "cloud-init user data (#cloud-config) for every node."
  value       = local.user_data
}

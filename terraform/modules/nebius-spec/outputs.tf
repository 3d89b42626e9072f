output "values" {
  description = "Every value, defaults filled in, public_ip resolved for the kind."
  value       = merge(local.v, { public_ip = local.public_ip })
}

output "labels" {
  description = "The user's labels plus pav-run-id and pav-expires-at, for every resource."
  value       = local.labels
}

output "gpus" {
  description = "GPUs per node of the preset."
  value       = local.gpus
}

output "fabric" {
  description = "How NCCL crosses nodes: infiniband (8-GPU presets) or socket."
  value       = local.fabric
}

output "with_cluster" {
  description = "Whether the nodes join an InfiniBand GPU cluster on infiniband_fabric."
  value       = local.with_cluster
}

output "hourly_usd" {
  description = "List price per node-hour of the preset in US dollars (the catalog's figure; null where it has none)."
  value       = try(local.platform.presets[local.v.preset].usd_per_hour, null)
}

output "system_nodes" {
  description = "The CPU node group for system pods on mk8s: platform, preset, count."
  value       = merge(module.catalog.system_nodes, { count = local.v.system_node_count })
}

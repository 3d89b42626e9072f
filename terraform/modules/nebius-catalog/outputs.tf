output "regions" {
  description = "Region -> {platforms: GPU platform -> {presets: preset -> {gpus, ...}, fabrics: [...]}}."
  value       = local.regions
}

output "fabrics" {
  description = "InfiniBand fabric -> {region, platform} it carries (the fabrics known here)."
  value       = local.fabrics
}

output "disk_size_steps_gib" {
  description = "Disk type -> the step its size must be a multiple of, in GiB."
  value       = local.disk_size_steps_gib
}

output "filesystem_types" {
  description = "Types a shared filesystem may have."
  value       = local.filesystem_types
}

output "system_nodes" {
  description = "Platform, preset and boot disk (GiB) of the mk8s CPU node group for system pods."
  value       = local.system_nodes
}

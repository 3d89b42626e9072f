output "presets" {
  description = "GPU platform -> preset -> GPUs per VM or node."
  value       = local.presets
}

output "fabric_platforms" {
  description = "InfiniBand fabric -> the GPU platform it carries (the fabrics known here)."
  value       = local.fabric_platforms
}

output "disk_size_steps_gib" {
  description = "Disk type -> the step its size must be a multiple of, in GiB."
  value       = local.disk_size_steps_gib
}

# What the inputs imply, and the checks that span several variables. Kept apart from main.tf and free of
# provider resources, so the tests evaluate them with real Terraform and no Nebius provider.
locals {
  # Evaluated at plan time of the create; ignore_changes in main.tf keeps the first value.
  # UTC as YYYYMMDDhhmmss: digits only, so no label-value rule can refuse it, and fixed width compares as text.
  expires_at = formatdate("YYYYMMDDhhmmss", timeadd(plantimestamp(), "${var.max_lifetime_hours}h"))
  labels = merge(var.labels, {
    "pav-run-id"     = var.run_id
    "pav-expires-at" = local.expires_at
  })

  # GPUs of the preset on the platform (0: a pair the catalog does not list, rejected below).
  gpus = lookup(lookup(module.catalog.presets, var.platform, {}), var.preset, 0)
  # The platform the chosen fabric is known to carry (the platform itself when the catalog does not know it).
  fabric_platform = lookup(module.catalog.fabric_platforms, var.infiniband_fabric, var.platform)
  disk_step_gib   = lookup(module.catalog.disk_size_steps_gib, var.boot_disk_type, 1)

  # Only 8-GPU presets have InfiniBand HCAs: only they join a GPU cluster.
  with_cluster = local.gpus == 8 && var.infiniband_fabric != ""

  # Node image OS: the cuda12.8 driver preset ships on Ubuntu 24.04 only; null keeps Nebius' default.
  node_os = var.drivers_preset == "cuda12.8" ? "ubuntu24.04" : null

  # Nebius' own applications (name: product), as its solution library installs them:
  # - the device plugin: the node image has the driver (drivers_preset), but nothing advertises the GPUs
  #   to the kubelet; without it no node shows nvidia.com/gpu and no job can be scheduled;
  # - NVIDIA's network operator when the nodes join a GPU cluster on a fabric: InfiniBand inside pods
  #   comes through its RDMA device plugin (the resource k8s_rdma_resource names).
  applications = merge(
    { nvidia-device-plugin = "nebius/nvidia-device-plugin" },
    local.with_cluster ? { network-operator = "nebius/nvidia-network-operator" } : {},
  )
}

module "catalog" {
  source = "../nebius-catalog"
}

# Cross-variable checks as preconditions (variable validations may only name other variables from
# Terraform 1.9). They fail the plan, before anything is created.
resource "terraform_data" "input_checks" {
  lifecycle {
    precondition {
      condition     = local.gpus > 0
      error_message = "preset is not offered on this platform: gpu-h100-sxm and gpu-h200-sxm take 8gpu-128vcpu-1600gb or 1gpu-16vcpu-200gb."
    }
    precondition {
      condition     = local.gpus != 8 || var.node_count == 1 || var.infiniband_fabric != ""
      error_message = "infiniband_fabric is required for more than one 8-GPU node: set it to a fabric your GPU quota is on (e.g. fabric-3 in eu-north1)."
    }
    precondition {
      condition     = var.boot_disk_size_gib % local.disk_step_gib == 0
      error_message = "boot_disk_size_gib must be a multiple of ${local.disk_step_gib} for ${var.boot_disk_type} disks (e.g. ${2 * local.disk_step_gib} or ${3 * local.disk_step_gib}), or pick another boot_disk_type."
    }
    precondition {
      condition     = !local.with_cluster || local.fabric_platform == var.platform
      error_message = "infiniband_fabric ${var.infiniband_fabric} carries ${local.fabric_platform}, not ${var.platform}: set a fabric of your platform's region (terraform/modules/nebius-catalog lists the known ones)."
    }
  }
}

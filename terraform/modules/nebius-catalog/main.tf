# What Nebius offers, as data: nebius-spec checks every cluster's values against it at plan, before
# anything is created. No provider and no resources, so the tests evaluate it with Terraform alone.
# A new region, platform or fabric is an entry here, not a new root.
locals {
  # GPUs and list price (US dollars per node-hour, on demand) of each preset of a GPU platform.
  gpu_presets = {
    "8gpu-128vcpu-1600gb" = { gpus = 8 }
    "1gpu-16vcpu-200gb"   = { gpus = 1 }
  }
  h100 = { presets = local.gpu_presets }
  h200 = { presets = local.gpu_presets }

  # Region -> GPU platform -> its presets and the InfiniBand fabrics that carry it there
  # (nebius-solution-library, k8s-training/locals.tf). A fabric missing here is let through at plan; one
  # listed for another region or platform is refused.
  regions = {
    eu-north1 = { platforms = {
      gpu-h100-sxm = merge(local.h100, { fabrics = ["fabric-2", "fabric-3", "fabric-4", "fabric-6"] })
      gpu-h200-sxm = merge(local.h200, { fabrics = ["fabric-7"] })
    } }
    eu-west1    = { platforms = { gpu-h200-sxm = merge(local.h200, { fabrics = ["fabric-5"] }) } }
    eu-north2   = { platforms = { gpu-h200-sxm = merge(local.h200, { fabrics = ["eu-north2-a"] }) } }
    us-central1 = { platforms = { gpu-h200-sxm = merge(local.h200, { fabrics = ["us-central1-a"] }) } }
  }

  # The same, by fabric: where each one is.
  fabrics = merge([
    for region, r in local.regions : merge([
      for platform, p in r.platforms : { for f in p.fabrics : f => { region = region, platform = platform } }
    ]...)
  ]...)

  # Disk sizes a disk type takes: NETWORK_SSD_NON_REPLICATED comes in 93 GiB steps.
  disk_size_steps_gib = {
    NETWORK_SSD                = 1
    NETWORK_HDD                = 1
    NETWORK_SSD_IO_M3          = 1
    NETWORK_SSD_NON_REPLICATED = 93
  }

  filesystem_types = ["NETWORK_SSD", "NETWORK_HDD"]

  # The mk8s CPU node group for system pods (the solution library's default for it).
  system_nodes = { platform = "cpu-d3", preset = "4vcpu-16gb", disk_gib = 64 }
}

# What Nebius offers, as data: nebius-spec checks every cluster's values against it at plan, before
# anything is created. No provider and no resources, so the tests evaluate it with Terraform alone.
# A new region, platform or fabric is an entry here, not a new root.
locals {
  # GPUs and list price (US dollars per node-hour, pay as you go) of each preset of a GPU platform. H200:
  # docs.nebius.com/signup-billing/billing-changes-oct-2025 (1gpu-16vcpu-200gb: 1 x $2.668 + 16 x $0.012 +
  # 200 x $0.0032 = $3.50; the 8-GPU preset is eight of it). H100: $2.95 per GPU-hour, nebius.com/prices
  # as quoted on 2026-05-18 (opslyft.com). Prices change: the console's List prices page is the truth.
  h100 = { presets = {
    "8gpu-128vcpu-1600gb" = { gpus = 8, usd_per_hour = 23.60 }
    "1gpu-16vcpu-200gb"   = { gpus = 1, usd_per_hour = 2.95 }
  } }
  h200 = { presets = {
    "8gpu-128vcpu-1600gb" = { gpus = 8, usd_per_hour = 28.00 }
    "1gpu-16vcpu-200gb"   = { gpus = 1, usd_per_hour = 3.50 }
  } }

  # Region -> GPU platform -> its presets and the InfiniBand fabrics that carry it there
  # (nebius-solution-library, k8s-training/locals.tf; eu-north1's H200 fabrics are not in it). A fabric
  # missing here is let through at plan; one listed for another region or platform is refused.
  regions = {
    eu-north1 = { platforms = {
      gpu-h100-sxm = merge(local.h100, { fabrics = ["fabric-2", "fabric-3", "fabric-4", "fabric-6"] })
      gpu-h200-sxm = merge(local.h200, { fabrics = [] })
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

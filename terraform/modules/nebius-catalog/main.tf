# What Nebius offers, as data: the cluster modules check their inputs against it at plan, before anything
# is created. No provider and no resources, so tests evaluate it with Terraform alone.
locals {
  # GPUs per preset, per GPU platform.
  presets = {
    gpu-h100-sxm = { "8gpu-128vcpu-1600gb" = 8, "1gpu-16vcpu-200gb" = 1 }
    gpu-h200-sxm = { "8gpu-128vcpu-1600gb" = 8, "1gpu-16vcpu-200gb" = 1 }
  }

  # InfiniBand fabrics known to carry one GPU platform: eu-north1's H100 fabrics, and the H200 fabrics of
  # eu-west1, eu-north2 and us-central1 (nebius-solution-library, k8s-training/locals.tf). Not complete: a
  # fabric missing here is let through, one of another platform is refused.
  fabric_platforms = {
    "fabric-2"      = "gpu-h100-sxm"
    "fabric-3"      = "gpu-h100-sxm"
    "fabric-4"      = "gpu-h100-sxm"
    "fabric-6"      = "gpu-h100-sxm"
    "fabric-5"      = "gpu-h200-sxm"
    "eu-north2-a"   = "gpu-h200-sxm"
    "us-central1-a" = "gpu-h200-sxm"
  }

  # Disk sizes a disk type takes: NETWORK_SSD_NON_REPLICATED comes in 93 GiB steps.
  disk_size_steps_gib = {
    NETWORK_SSD                = 1
    NETWORK_HDD                = 1
    NETWORK_SSD_IO_M3          = 1
    NETWORK_SSD_NON_REPLICATED = 93
  }
}

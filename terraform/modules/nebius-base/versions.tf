terraform {
  required_providers {
    # Managed boot disks (the VM module) need 0.6.3; the roots pin the version.
    nebius = { source = "nebius/nebius", version = ">= 0.6.3" }
  }
}

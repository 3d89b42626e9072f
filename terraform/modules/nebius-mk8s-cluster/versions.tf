terraform {
  # plantimestamp() (the expiry label) needs 1.5.
  required_version = ">= 1.5"

  required_providers {
    nebius = {
      # The Terraform Registry address since 0.6.0; 0.5.x came from
      # terraform-provider.storage.eu-north1.nebius.cloud/nebius/nebius. Managed boot disks need 0.6.3.
      source  = "nebius/nebius"
      version = "~> 0.6.3"
    }
  }
}

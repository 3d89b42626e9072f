terraform {
  required_version = ">= 1.5"

  required_providers {
    nebius = {
      # The Terraform Registry address since 0.6.0; 0.5.x came from
      # terraform-provider.storage.eu-north1.nebius.cloud/nebius/nebius. Managed boot disks need 0.6.3.
      source  = "nebius/nebius"
      version = "~> 0.6.3"
    }
  }

  # State path is set at init (-backend-config=path=...): the env's state dir, never this folder.
  backend "local" {}
}

# Credentials come from the environment only. NEBIUS_IAM_TOKEN is read by the provider itself, but only
# when no service_account block is set; the driver picks nebius_auth from what the environment holds.
provider "nebius" {
  service_account = var.nebius_auth == "service_account" ? {
    account_id_env       = "NEBIUS_SERVICE_ACCOUNT_ID"
    public_key_id_env    = "NEBIUS_PUBLIC_KEY_ID"
    private_key_file_env = "NEBIUS_PRIVATE_KEY_FILE"
  } : null
}

# The provider's own variable, beside the block that reads it (variables.tf holds the cluster's values).
variable "nebius_auth" {
  description = "Which credentials the provider reads from the environment: token (NEBIUS_IAM_TOKEN) or service_account (NEBIUS_SERVICE_ACCOUNT_ID, NEBIUS_PUBLIC_KEY_ID, NEBIUS_PRIVATE_KEY_FILE)."
  type        = string

  validation {
    condition     = contains(["token", "service_account"], var.nebius_auth)
    error_message = "nebius_auth must be token or service_account."
  }
}

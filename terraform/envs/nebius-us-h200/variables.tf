# A null value (the default here) means the module's default; the module validates every value.

variable "nebius_auth" {
  description = "Which credentials the provider reads from the environment: token (NEBIUS_IAM_TOKEN) or service_account (NEBIUS_SERVICE_ACCOUNT_ID, NEBIUS_PUBLIC_KEY_ID, NEBIUS_PRIVATE_KEY_FILE)."
  type        = string

  validation {
    condition     = contains(["token", "service_account"], var.nebius_auth)
    error_message = "nebius_auth must be token or service_account."
  }
}

variable "parent_id" {
  description = "Nebius project ID in us-central1 (project-...)."
  type        = string
}

variable "node_count" {
  description = "How many H200 VMs to create (the driver passes --hosts / pav_hosts)."
  type        = number
}

variable "preset" {
  description = "gpu-h200-sxm preset: 8gpu-128vcpu-1600gb or 1gpu-16vcpu-200gb."
  type        = string
  default     = "8gpu-128vcpu-1600gb"
}

variable "infiniband_fabric" {
  description = "us-central1 InfiniBand fabric of the H200 GPU cluster."
  type        = string
  default     = "us-central1-a"
}

variable "subnet_id" {
  description = "Existing subnet (vpcsubnet-...); unset: create a network and subnet."
  type        = string
  default     = null
}

variable "name_prefix" {
  description = "Prefix of every resource name."
  type        = string
  default     = null
}

variable "boot_image_family" {
  description = "Public image family of the boot disk."
  type        = string
  default     = null
}

variable "boot_image_parent_id" {
  description = "Project holding the image family; unset: the region's public images."
  type        = string
  default     = null
}

variable "boot_disk_size_gib" {
  description = "Boot disk size in GiB."
  type        = number
  default     = null
}

variable "boot_disk_type" {
  description = "Boot disk type."
  type        = string
  default     = null
}

variable "public_ip" {
  description = "Give every node a public IPv4 address."
  type        = bool
  default     = null
}

variable "ssh_user" {
  description = "User created on every node."
  type        = string
  default     = null
}

variable "ssh_public_key" {
  description = "OpenSSH public key authorized for ssh_user (the driver generates one per state dir)."
  type        = string
}

variable "shared_filesystem_size_gib" {
  description = "Shared filesystem size in GiB; 0 or unset: none."
  type        = number
  default     = null
}

variable "shared_filesystem_type" {
  description = "Shared filesystem type."
  type        = string
  default     = null
}

variable "shared_filesystem_mount" {
  description = "Mount point of the shared filesystem."
  type        = string
  default     = null
}

variable "labels" {
  description = "Extra labels on every resource."
  type        = map(string)
  default     = null
}

variable "max_lifetime_hours" {
  description = "Hours until the pav-expires-at label says the resources may be deleted."
  type        = number
  default     = null
}

variable "run_id" {
  description = "The run that creates the resources (pav-run-id label)."
  type        = string
}

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
  description = "Nebius project ID in eu-north1 (project-...)."
  type        = string
}

variable "node_count" {
  description = "GPU nodes in the node group (the driver passes --hosts / pav_hosts)."
  type        = number
}

variable "preset" {
  description = "gpu-h100-sxm preset: 8gpu-128vcpu-1600gb or 1gpu-16vcpu-200gb."
  type        = string
  default     = "8gpu-128vcpu-1600gb"
}

variable "infiniband_fabric" {
  description = "eu-north1 InfiniBand fabric your H100 quota is on: fabric-2, fabric-3, fabric-4 or fabric-6."
  type        = string
  default     = null
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

variable "k8s_version" {
  description = "Kubernetes version (major.minor)."
  type        = string
  default     = null
}

variable "drivers_preset" {
  description = "NVIDIA driver/CUDA preset of the GPU nodes' image (gpu_settings.drivers_preset)."
  type        = string
  default     = null
}

variable "etcd_cluster_size" {
  description = "etcd instances of the control plane: 1 or 3."
  type        = number
  default     = null
}

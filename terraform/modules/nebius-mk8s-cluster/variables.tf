variable "parent_id" {
  description = "Nebius project ID (project-...). The project fixes the region every resource lands in."
  type        = string

  validation {
    condition     = can(regex("^project-[a-z0-9]+$", var.parent_id))
    error_message = "parent_id must be a project ID like project-e00abc123 (the prefix project- then lowercase letters and digits)."
  }
}

variable "name_prefix" {
  description = "Prefix of every resource name; nodes are PREFIX-0, PREFIX-1, ... Unique per project and run."
  type        = string
  default     = "pav"
  nullable    = false

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,30}[a-z0-9]$", var.name_prefix))
    error_message = "name_prefix must be 2 to 32 characters of a-z, 0-9 and -, start with a letter and not end with -."
  }
}

variable "node_count" {
  description = "GPU nodes in the node group (one job worker each)."
  type        = number

  validation {
    condition     = var.node_count >= 1 && var.node_count <= 64 && floor(var.node_count) == var.node_count
    error_message = "node_count must be a whole number from 1 to 64."
  }
}

variable "platform" {
  description = "Compute platform of every node: gpu-h100-sxm or gpu-h200-sxm."
  type        = string

  validation {
    condition     = contains(["gpu-h100-sxm", "gpu-h200-sxm"], var.platform)
    error_message = "platform must be gpu-h100-sxm or gpu-h200-sxm."
  }
}

variable "preset" {
  description = "Preset of the platform: 8gpu-128vcpu-1600gb (a full HGX host, InfiniBand) or 1gpu-16vcpu-200gb."
  type        = string
  default     = "8gpu-128vcpu-1600gb"
  nullable    = false

  validation {
    condition     = contains(["8gpu-128vcpu-1600gb", "1gpu-16vcpu-200gb"], var.preset)
    error_message = "preset must be 8gpu-128vcpu-1600gb or 1gpu-16vcpu-200gb."
  }
}

variable "infiniband_fabric" {
  description = "InfiniBand fabric of the GPU cluster (eu-north1: fabric-2, -3, -4, -6; us-central1: us-central1-a). Needed for more than one 8-GPU node; ignored for 1-GPU presets."
  type        = string
  default     = ""
  nullable    = false

  validation {
    condition     = var.infiniband_fabric == "" || can(regex("^(fabric-[0-9]+|[a-z]+-[a-z]+[0-9]+-[a-z])$", var.infiniband_fabric))
    error_message = "infiniband_fabric must be empty or a fabric name like fabric-3 or us-central1-a."
  }
}

variable "subnet_id" {
  description = "Existing subnet (vpcsubnet-...) for the nodes. Empty: create a network and subnet for this cluster."
  type        = string
  default     = ""
  nullable    = false

  validation {
    condition     = var.subnet_id == "" || can(regex("^vpcsubnet-[a-z0-9]+$", var.subnet_id))
    error_message = "subnet_id must be empty or a subnet ID like vpcsubnet-e00abc123."
  }
}

variable "boot_disk_size_gib" {
  description = "Boot disk size in GiB: CUDA images, containers and nccl-tests builds need room."
  type        = number
  default     = 200
  nullable    = false

  validation {
    condition     = var.boot_disk_size_gib >= 50 && var.boot_disk_size_gib <= 16384 && floor(var.boot_disk_size_gib) == var.boot_disk_size_gib
    error_message = "boot_disk_size_gib must be a whole number from 50 to 16384."
  }
}

variable "boot_disk_type" {
  description = "Boot disk type."
  type        = string
  default     = "NETWORK_SSD"
  nullable    = false

  validation {
    condition     = contains(["NETWORK_SSD", "NETWORK_HDD", "NETWORK_SSD_NON_REPLICATED", "NETWORK_SSD_IO_M3"], var.boot_disk_type)
    error_message = "boot_disk_type must be NETWORK_SSD, NETWORK_HDD, NETWORK_SSD_NON_REPLICATED or NETWORK_SSD_IO_M3."
  }
}

variable "public_ip" {
  description = "Give every node a public IPv4 address (for SSH when debugging a node; the driver only talks to the Kubernetes API)."
  type        = bool
  default     = false
  nullable    = false
}

variable "ssh_user" {
  description = "User cloud-init creates on every node, with the SSH key (for debugging nodes by hand)."
  type        = string
  default     = "pav"
  nullable    = false

  validation {
    condition     = can(regex("^[a-z_][a-z0-9_-]{0,31}$", var.ssh_user)) && var.ssh_user != "root"
    error_message = "ssh_user must be a Linux user name (a-z, 0-9, _ and -, at most 32 characters), not root."
  }
}

variable "ssh_public_key" {
  description = "OpenSSH public key (one line) authorized for ssh_user."
  type        = string

  validation {
    condition     = can(regex("^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)|sk-ssh-ed25519@openssh\\.com) [A-Za-z0-9+/]+={0,3}( [^\\n]*)?$", var.ssh_public_key))
    error_message = "ssh_public_key must be one OpenSSH public key line such as ssh-ed25519 AAAA... comment."
  }
}

variable "labels" {
  description = "Extra labels on every resource. Keys starting with pav- are reserved for the tool."
  type        = map(string)
  default     = {}
  nullable    = false

  validation {
    condition = alltrue([
      for k, v in var.labels : can(regex("^[a-z][a-z0-9_-]{0,62}$", k)) && !startswith(k, "pav-") && length(v) <= 63
    ])
    error_message = "labels keys must be 1 to 63 of a-z, 0-9, _ and - starting with a letter, not pav-; values at most 63 characters."
  }
}

variable "max_lifetime_hours" {
  description = "Hours after creation at which a janitor may delete the resources; written to the pav-expires-at label."
  type        = number
  default     = 12
  nullable    = false

  validation {
    condition     = var.max_lifetime_hours >= 1 && var.max_lifetime_hours <= 720 && floor(var.max_lifetime_hours) == var.max_lifetime_hours
    error_message = "max_lifetime_hours must be a whole number from 1 to 720."
  }
}

variable "run_id" {
  description = "The provision-and-validate run that creates the resources; written to the pav-run-id label."
  type        = string

  validation {
    condition     = can(regex("^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$", var.run_id))
    error_message = "run_id must be 1 to 63 characters of letters, digits, ., _ and -, starting with a letter or digit."
  }
}

variable "k8s_version" {
  description = "Kubernetes version (major.minor) of the control plane and the node group."
  type        = string
  default     = "1.31"
  nullable    = false

  validation {
    condition     = can(regex("^1\\.[0-9]{2}$", var.k8s_version))
    error_message = "k8s_version must be major.minor, e.g. 1.31."
  }
}

variable "drivers_preset" {
  description = "gpu_settings.drivers_preset of the GPU node group: the NVIDIA driver and CUDA in the node image (cuda12, cuda12.4, cuda12.8)."
  type        = string
  default     = "cuda12"
  nullable    = false

  validation {
    condition     = can(regex("^cuda[0-9]+(\\.[0-9]+)?$", var.drivers_preset))
    error_message = "drivers_preset must name a CUDA preset such as cuda12, cuda12.4 or cuda12.8."
  }
}

variable "etcd_cluster_size" {
  description = "etcd instances of the control plane: 1, or 3 for a highly available one."
  type        = number
  default     = 1
  nullable    = false

  validation {
    condition     = contains([1, 3], var.etcd_cluster_size)
    error_message = "etcd_cluster_size must be 1 or 3."
  }
}

variable "kind" {
  description = "Which cluster module reads the spec: vm (GPU VMs) or mk8s (Managed Kubernetes); picks the defaults that differ."
  type        = string
}

# One object, so both cluster modules and the env roots pass it through without listing its keys again.
# Attributes a kind does not use are ignored by it (the driver refuses them in the user's values file).
variable "values" {
  description = "The env's fixed values, the user's values file and the driver's keys (node_count, ssh_public_key, run_id)."
  type = object({
    # Where and what: the env fixes region and platform; parent_id is the user's project in that region.
    region    = string
    platform  = string
    parent_id = string
    preset    = optional(string, "8gpu-128vcpu-1600gb")
    # Needed for more than one 8-GPU node; ignored for 1-GPU presets.
    infiniband_fabric = optional(string, "")
    node_count        = number

    # Names and labels: nodes are PREFIX-0, PREFIX-1, ...; pav-* label keys are the tool's.
    name_prefix        = optional(string, "pav")
    run_id             = string
    labels             = optional(map(string), {})
    max_lifetime_hours = optional(number, 12)

    # Network: an existing subnet, or "" to create a network and subnet. null public_ip: the kind's default.
    subnet_id = optional(string, "")
    public_ip = optional(bool)

    # Boot disk; a CUDA image family ships the NVIDIA driver (vm only: mk8s node images come with it).
    boot_disk_size_gib   = optional(number, 200)
    boot_disk_type       = optional(string, "NETWORK_SSD")
    boot_image_family    = optional(string, "ubuntu22.04-cuda12")
    boot_image_parent_id = optional(string, "")

    # The login cloud-init creates on every node (the driver's key; on mk8s for debugging by hand).
    ssh_user       = optional(string, "pav")
    ssh_public_key = string

    # A shared filesystem on every node: an existing one (shared_filesystem_id), else a new one of
    # shared_filesystem_size_gib (0: none), destroyed with the cluster.
    shared_filesystem_id       = optional(string, "")
    shared_filesystem_size_gib = optional(number, 0)
    shared_filesystem_type     = optional(string, "NETWORK_SSD")
    shared_filesystem_mount    = optional(string, "/mnt/shared")

    # mk8s only: control plane, the GPU nodes' driver image, and the CPU node group for system pods.
    k8s_version       = optional(string, "1.31")
    drivers_preset    = optional(string, "cuda12")
    etcd_cluster_size = optional(number, 1)
    system_node_count = optional(number, 1)
  })

  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]+$", var.values.region))
    error_message = "region must be a Nebius region such as eu-north1."
  }
  validation {
    condition     = can(regex("^project-[a-z0-9]+$", var.values.parent_id))
    error_message = "parent_id must be a project ID like project-e00abc123 (the prefix project- then lowercase letters and digits)."
  }
  validation {
    condition     = var.values.infiniband_fabric == "" || can(regex("^(fabric-[0-9]+|[a-z]+-[a-z]+[0-9]+-[a-z])$", var.values.infiniband_fabric))
    error_message = "infiniband_fabric must be empty or a fabric name like fabric-3 or us-central1-a."
  }
  validation {
    condition     = var.values.node_count >= 1 && var.values.node_count <= 64 && floor(var.values.node_count) == var.values.node_count
    error_message = "node_count must be a whole number from 1 to 64."
  }
  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{0,30}[a-z0-9]$", var.values.name_prefix))
    error_message = "name_prefix must be 2 to 32 characters of a-z, 0-9 and -, start with a letter and not end with -."
  }
  validation {
    condition     = can(regex("^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$", var.values.run_id))
    error_message = "run_id must be 1 to 63 characters of letters, digits, ., _ and -, starting with a letter or digit."
  }
  validation {
    condition = alltrue([
      for k, v in var.values.labels : can(regex("^[a-z][a-z0-9_-]{0,62}$", k)) && !startswith(k, "pav-") && length(v) <= 63
    ])
    error_message = "labels keys must be 1 to 63 of a-z, 0-9, _ and - starting with a letter, not pav-; values at most 63 characters."
  }
  validation {
    condition     = var.values.max_lifetime_hours >= 1 && var.values.max_lifetime_hours <= 720 && floor(var.values.max_lifetime_hours) == var.values.max_lifetime_hours
    error_message = "max_lifetime_hours must be a whole number from 1 to 720."
  }
  validation {
    condition     = var.values.subnet_id == "" || can(regex("^vpcsubnet-[a-z0-9]+$", var.values.subnet_id))
    error_message = "subnet_id must be empty or a subnet ID like vpcsubnet-e00abc123."
  }
  validation {
    condition     = var.values.boot_disk_size_gib >= 50 && var.values.boot_disk_size_gib <= 16384 && floor(var.values.boot_disk_size_gib) == var.values.boot_disk_size_gib
    error_message = "boot_disk_size_gib must be a whole number from 50 to 16384."
  }
  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9.-]{1,62}$", var.values.boot_image_family))
    error_message = "boot_image_family must be an image family name like ubuntu22.04-cuda12 (a-z, 0-9, . and -)."
  }
  validation {
    condition     = var.values.boot_image_parent_id == "" || can(regex("^project-[a-z0-9]+$", var.values.boot_image_parent_id))
    error_message = "boot_image_parent_id must be empty or a project ID like project-e00public-images."
  }
  validation {
    condition     = can(regex("^[a-z_][a-z0-9_-]{0,31}$", var.values.ssh_user)) && var.values.ssh_user != "root"
    error_message = "ssh_user must be a Linux user name (a-z, 0-9, _ and -, at most 32 characters), not root."
  }
  validation {
    condition     = can(regex("^(ssh-ed25519|ssh-rsa|ecdsa-sha2-nistp(256|384|521)|sk-ssh-ed25519@openssh\\.com) [A-Za-z0-9+/]+={0,3}( [^\\n]*)?$", var.values.ssh_public_key))
    error_message = "ssh_public_key must be one OpenSSH public key line such as ssh-ed25519 AAAA... comment."
  }
  validation {
    condition     = var.values.shared_filesystem_id == "" || can(regex("^computefilesystem-[a-z0-9]+$", var.values.shared_filesystem_id))
    error_message = "shared_filesystem_id must be empty or a filesystem ID like computefilesystem-e00abc123."
  }
  validation {
    condition     = var.values.shared_filesystem_size_gib >= 0 && var.values.shared_filesystem_size_gib <= 1048576 && floor(var.values.shared_filesystem_size_gib) == var.values.shared_filesystem_size_gib
    error_message = "shared_filesystem_size_gib must be a whole number from 0 (none) to 1048576."
  }
  validation {
    condition     = can(regex("^(/[A-Za-z0-9._-]+)+$", var.values.shared_filesystem_mount))
    error_message = "shared_filesystem_mount must be an absolute path such as /mnt/shared."
  }
  validation {
    condition     = can(regex("^1\\.[0-9]{2}$", var.values.k8s_version))
    error_message = "k8s_version must be major.minor, e.g. 1.31."
  }
  validation {
    condition     = can(regex("^cuda[0-9]+(\\.[0-9]+)?$", var.values.drivers_preset))
    error_message = "drivers_preset must name a CUDA preset such as cuda12, cuda12.4 or cuda12.8."
  }
  validation {
    condition     = contains([1, 3], var.values.etcd_cluster_size)
    error_message = "etcd_cluster_size must be 1 or 3."
  }
  validation {
    condition     = contains([0, 1, 2, 3], var.values.system_node_count)
    error_message = "system_node_count must be 0 to 3 (CPU nodes for the operators and system pods)."
  }
}

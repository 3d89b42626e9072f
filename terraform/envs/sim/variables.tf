variable "hosts" {
  description = "How many simulated hosts to create."
  type        = number
  default     = 3

  validation {
    condition     = var.hosts >= 1 && var.hosts <= 64 && floor(var.hosts) == var.hosts
    error_message = "hosts must be a whole number from 1 to 64."
  }
}

variable "cluster_id" {
  description = "Short id naming the cluster's bridge, namespaces and hosts (1-6 of a-z, 0-9)."
  type        = string

  validation {
    condition     = can(regex("^[a-z0-9]{1,6}$", var.cluster_id))
    error_message = "cluster_id must be 1 to 6 characters of a-z and 0-9."
  }
}

variable "subnet_index" {
  description = "K in 10.77.K.0/24, the cluster's private subnet."
  type        = number

  validation {
    condition     = var.subnet_index >= 0 && var.subnet_index <= 250 && floor(var.subnet_index) == var.subnet_index
    error_message = "subnet_index must be a whole number from 0 to 250."
  }
}

variable "state_dir" {
  description = "Absolute folder where scripts/sim-hosts keeps the hosts' runtime state."
  type        = string

  validation {
    condition     = startswith(var.state_dir, "/")
    error_message = "state_dir must be an absolute path."
  }
}

variable "ssh_public_key_file" {
  description = "Public key authorized for root on every host."
  type        = string
}

variable "sim_hosts_script" {
  description = "Command that runs scripts/sim-hosts (an installed driver passes its Python and its copy); empty means the one in this repository."
  type        = string
  default     = ""
}

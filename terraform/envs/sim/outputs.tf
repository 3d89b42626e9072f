# The same host map shape every env's Terraform returns; the driver turns it into the inventory.
output "hosts" {
  description = "Map of host name to {name, public_ip, private_ip, ssh_user, ssh_port, gpus, fabric}."
  value = {
    for i, h in terraform_data.host : h.input.name => {
      name       = h.input.name
      public_ip  = "10.77.${var.subnet_index}.${10 + i}"
      private_ip = "10.77.${var.subnet_index}.${10 + i}"
      ssh_user   = "root"
      ssh_port   = 22
      gpus       = 0
      fabric     = "socket"
    }
  }
}

output "known_hosts_dir" {
  description = "Folder of NAME.known_hosts files with each host's key, for pinning."
  value       = "${var.state_dir}/hosts"
}

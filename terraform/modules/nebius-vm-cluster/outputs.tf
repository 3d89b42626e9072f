# Reads local.nodes, local.gpu_cluster_id (main.tf) and the spec only, so the tests evaluate it over fake nodes.

# The same host map shape every env's Terraform returns; the driver turns it into the inventory.
output "hosts" {
  description = "Map of host name to {name, public_ip, private_ip, ssh_user, ssh_port, gpus, fabric}."
  value = {
    for n in local.nodes : n.name => {
      name = n.name
      # Without public IPs the controller reaches the nodes on their private addresses.
      public_ip  = split("/", local.v.public_ip ? n.public : n.private)[0]
      private_ip = split("/", n.private)[0]
      ssh_user   = local.v.ssh_user
      ssh_port   = 22
      gpus       = module.base.spec.gpus
      fabric     = module.base.spec.fabric
    }
  }
}

output "gpu_cluster_id" {
  description = "ID of the InfiniBand GPU cluster the nodes joined; empty when there is none."
  value       = local.gpu_cluster_id
}

# Reads only variables and locals (local.nodes, local.gpu_cluster_id from main.tf; local.gpus and
# local.fabric from checks.tf), so the tests evaluate it with fake nodes and no provider.

# The same host map shape every env's Terraform returns; the driver turns it into the inventory.
output "hosts" {
  description = "Map of host name to {name, public_ip, private_ip, ssh_user, ssh_port, gpus, fabric}."
  value = {
    for n in local.nodes : n.name => {
      name = n.name
      # Without public IPs the controller reaches the nodes on their private addresses.
      public_ip  = split("/", var.public_ip ? n.public : n.private)[0]
      private_ip = split("/", n.private)[0]
      ssh_user   = var.ssh_user
      ssh_port   = 22
      gpus       = local.gpus
      fabric     = local.fabric
    }
  }
}

output "gpu_cluster_id" {
  description = "ID of the InfiniBand GPU cluster the nodes joined; empty when there is none."
  value       = local.gpu_cluster_id
}

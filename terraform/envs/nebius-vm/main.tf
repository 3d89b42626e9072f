# GPU VMs in any region the catalog knows: the env (inventories/ENV/provision.yml) fixes region and
# platform, so a new region or GPU is a values file, not another root.
module "cluster" {
  source = "../../modules/nebius-vm-cluster"
  values = var.values
}

# Managed Kubernetes with a GPU node group in any region the catalog knows: the env
# (inventories/ENV/provision.yml) fixes region and platform.
module "cluster" {
  source = "../../modules/nebius-mk8s-cluster"
  values = var.values
}

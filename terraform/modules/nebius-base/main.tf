# What every Nebius cluster here has, VMs or Managed Kubernetes: the checked values (nebius-spec), the
# nodes' subnet (network.tf), the InfiniBand GPU cluster (gpu_fabric.tf), the shared filesystem
# (filesystem.tf) and the nodes' cloud-init (node_init.tf).
module "spec" {
  source = "../nebius-spec"
  kind   = var.kind
  values = var.values
}

locals {
  v = module.spec.values
}

# eu-north1 (Finland): Managed Kubernetes with a GPU node group of H100 SXM nodes. The region is the
# project's: parent_id decides it.
module "cluster" {
  source = "../../modules/nebius-mk8s-cluster"

  platform = "gpu-h100-sxm"

  parent_id          = var.parent_id
  node_count         = var.node_count
  preset             = var.preset
  infiniband_fabric  = var.infiniband_fabric
  subnet_id          = var.subnet_id
  name_prefix        = var.name_prefix
  boot_disk_size_gib = var.boot_disk_size_gib
  boot_disk_type     = var.boot_disk_type
  public_ip          = var.public_ip
  ssh_user           = var.ssh_user
  ssh_public_key     = var.ssh_public_key
  labels             = var.labels
  max_lifetime_hours = var.max_lifetime_hours
  run_id             = var.run_id
  k8s_version        = var.k8s_version
  drivers_preset     = var.drivers_preset
  etcd_cluster_size  = var.etcd_cluster_size
}

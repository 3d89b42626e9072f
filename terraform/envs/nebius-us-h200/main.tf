# us-central1: H200 SXM. The region is the project's: parent_id decides it.
module "cluster" {
  source = "../../modules/nebius-gpu-cluster"

  platform = "gpu-h200-sxm"

  parent_id                  = var.parent_id
  node_count                 = var.node_count
  preset                     = var.preset
  infiniband_fabric          = var.infiniband_fabric
  subnet_id                  = var.subnet_id
  name_prefix                = var.name_prefix
  boot_image_family          = var.boot_image_family
  boot_image_parent_id       = var.boot_image_parent_id
  boot_disk_size_gib         = var.boot_disk_size_gib
  boot_disk_type             = var.boot_disk_type
  public_ip                  = var.public_ip
  ssh_user                   = var.ssh_user
  ssh_public_key             = var.ssh_public_key
  shared_filesystem_size_gib = var.shared_filesystem_size_gib
  shared_filesystem_type     = var.shared_filesystem_type
  shared_filesystem_mount    = var.shared_filesystem_mount
  labels                     = var.labels
  max_lifetime_hours         = var.max_lifetime_hours
  run_id                     = var.run_id
}

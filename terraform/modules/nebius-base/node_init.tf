# cloud-init of every node, VM or mk8s: the login user with the driver's key, and the shared filesystem's
# mount (filesystem.tf).
locals {
  user_data = templatefile("${path.module}/cloud-init.yaml.tftpl", {
    ssh_user        = local.v.ssh_user
    ssh_public_key  = trimspace(local.v.ssh_public_key)
    shared_fs_tag   = local.filesystem_tag
    shared_fs_mount = local.v.shared_filesystem_mount
  })
}

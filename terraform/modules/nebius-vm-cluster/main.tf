# GPU VMs: one per node, each with a managed boot disk, in one subnet, joined to one InfiniBand GPU
# cluster when the preset has 8 GPUs, with an optional shared filesystem.
module "base" {
  source = "../nebius-base"
  kind   = "vm"
  values = var.values
}

locals {
  v = module.base.spec.values

  # What outputs.tf reads. Addresses come from status, as CIDR (10.0.0.5/32).
  nodes = [for vm in nebius_compute_v1_instance.node : {
    name    = vm.name
    private = try(vm.status.network_interfaces[0].ip_address.address, "")
    public  = try(vm.status.network_interfaces[0].public_ip_address.address, "")
  }]
  gpu_cluster_id = try(module.base.gpu_cluster.id, "")
}

# One resource per node: a failed create leaves only what exists for destroy, and a re-apply adds the rest.
resource "nebius_compute_v1_instance" "node" {
  count     = local.v.node_count
  parent_id = local.v.parent_id
  name      = "${local.v.name_prefix}-${count.index}"
  hostname  = "${local.v.name_prefix}-${count.index}"
  labels    = module.base.spec.labels

  resources = {
    platform = local.v.platform
    preset   = local.v.preset
  }

  # Managed: deleted together with the VM, so destroy leaves no orphaned disk.
  boot_disk = {
    attach_mode = "READ_WRITE"
    managed_disk = {
      name = "${local.v.name_prefix}-${count.index}-boot"
      spec = {
        type           = local.v.boot_disk_type
        size_gibibytes = local.v.boot_disk_size_gib
        source_image_family = {
          image_family = local.v.boot_image_family
          parent_id    = local.v.boot_image_parent_id != "" ? local.v.boot_image_parent_id : null
        }
      }
    }
  }

  network_interfaces = [{
    name              = "eth0"
    subnet_id         = module.base.subnet_id
    ip_address        = {}
    public_ip_address = local.v.public_ip ? {} : null
  }]

  gpu_cluster          = module.base.gpu_cluster
  filesystems          = module.base.filesystems
  cloud_init_user_data = module.base.user_data

  lifecycle {
    ignore_changes = [labels["pav-expires-at"], labels["pav-run-id"]]
  }
}

locals {
  subnet_id     = var.subnet_id != "" ? var.subnet_id : nebius_vpc_v1_subnet.this[0].id
  shared_fs_tag = var.shared_filesystem_size_gib > 0 ? "pav-shared" : ""

  cloud_init = templatefile("${path.module}/cloud-init.yaml.tftpl", {
    ssh_user        = var.ssh_user
    ssh_public_key  = trimspace(var.ssh_public_key)
    shared_fs_tag   = local.shared_fs_tag
    shared_fs_mount = var.shared_filesystem_mount
  })

  # What outputs.tf reads. Addresses come from status, as CIDR (10.0.0.5/32).
  nodes = [for vm in nebius_compute_v1_instance.node : {
    name    = vm.name
    private = try(vm.status.network_interfaces[0].ip_address.address, "")
    public  = try(vm.status.network_interfaces[0].public_ip_address.address, "")
  }]
  gpu_cluster_id = local.with_cluster ? nebius_compute_v1_gpu_cluster.this[0].id : ""
}

resource "nebius_vpc_v1_network" "this" {
  count     = var.subnet_id == "" ? 1 : 0
  parent_id = var.parent_id
  name      = "${var.name_prefix}-net"
  labels    = local.labels

  lifecycle {
    ignore_changes = [labels["pav-expires-at"], labels["pav-run-id"]]
  }
}

resource "nebius_vpc_v1_subnet" "this" {
  count      = var.subnet_id == "" ? 1 : 0
  parent_id  = var.parent_id
  name       = "${var.name_prefix}-subnet"
  network_id = nebius_vpc_v1_network.this[0].id
  labels     = local.labels

  ipv4_private_pools = {
    use_network_pools = true
  }

  lifecycle {
    ignore_changes = [labels["pav-expires-at"], labels["pav-run-id"]]
  }
}

resource "nebius_compute_v1_gpu_cluster" "this" {
  count             = local.with_cluster ? 1 : 0
  parent_id         = var.parent_id
  name              = "${var.name_prefix}-${var.infiniband_fabric}"
  infiniband_fabric = var.infiniband_fabric
  labels            = local.labels

  lifecycle {
    ignore_changes = [labels["pav-expires-at"], labels["pav-run-id"]]
  }

  depends_on = [terraform_data.input_checks]
}

resource "nebius_compute_v1_filesystem" "shared" {
  count          = var.shared_filesystem_size_gib > 0 ? 1 : 0
  parent_id      = var.parent_id
  name           = "${var.name_prefix}-shared"
  type           = var.shared_filesystem_type
  size_gibibytes = var.shared_filesystem_size_gib
  labels         = local.labels

  lifecycle {
    ignore_changes = [labels["pav-expires-at"], labels["pav-run-id"]]
  }
}

# One resource per node: a failed create leaves only what exists for destroy, and a re-apply adds the rest.
resource "nebius_compute_v1_instance" "node" {
  count     = var.node_count
  parent_id = var.parent_id
  name      = "${var.name_prefix}-${count.index}"
  hostname  = "${var.name_prefix}-${count.index}"
  labels    = local.labels

  resources = {
    platform = var.platform
    preset   = var.preset
  }

  # Managed: deleted together with the VM, so destroy leaves no orphaned disk.
  boot_disk = {
    attach_mode = "READ_WRITE"
    managed_disk = {
      name = "${var.name_prefix}-${count.index}-boot"
      spec = {
        type           = var.boot_disk_type
        size_gibibytes = var.boot_disk_size_gib
        source_image_family = {
          image_family = var.boot_image_family
          parent_id    = var.boot_image_parent_id != "" ? var.boot_image_parent_id : null
        }
      }
    }
  }

  network_interfaces = [{
    name              = "eth0"
    subnet_id         = local.subnet_id
    ip_address        = {}
    public_ip_address = var.public_ip ? {} : null
  }]

  gpu_cluster = local.with_cluster ? { id = nebius_compute_v1_gpu_cluster.this[0].id } : null

  filesystems = var.shared_filesystem_size_gib > 0 ? [{
    attach_mode         = "READ_WRITE"
    mount_tag           = local.shared_fs_tag
    existing_filesystem = { id = nebius_compute_v1_filesystem.shared[0].id }
  }] : []

  cloud_init_user_data = local.cloud_init

  lifecycle {
    ignore_changes = [labels["pav-expires-at"], labels["pav-run-id"]]
  }

  depends_on = [terraform_data.input_checks]
}

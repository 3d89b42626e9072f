locals {
  subnet_id = var.subnet_id != "" ? var.subnet_id : nebius_vpc_v1_subnet.this[0].id

  # A login for debugging a node by hand; the driver itself only talks to the Kubernetes API.
  cloud_init = "#cloud-config\n${yamlencode({
    users = [{
      name                = var.ssh_user
      sudo                = "ALL=(ALL) NOPASSWD:ALL"
      shell               = "/bin/bash"
      ssh_authorized_keys = [trimspace(var.ssh_public_key)]
    }]
  })}"

  # What outputs.tf reads.
  cluster_id     = nebius_mk8s_v1_cluster.this.id
  endpoint       = try(nebius_mk8s_v1_cluster.this.status.control_plane.endpoints.public_endpoint, "")
  ca_certificate = try(nebius_mk8s_v1_cluster.this.status.control_plane.auth.cluster_ca_certificate, "")
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

resource "nebius_mk8s_v1_cluster" "this" {
  parent_id = var.parent_id
  name      = "${var.name_prefix}-k8s"
  labels    = local.labels

  control_plane = {
    subnet_id         = local.subnet_id
    version           = var.k8s_version
    etcd_cluster_size = var.etcd_cluster_size
    # The driver runs kubectl from outside the VPC.
    endpoints = {
      public_endpoint = {}
    }
  }

  lifecycle {
    ignore_changes = [labels["pav-expires-at"], labels["pav-run-id"]]
  }

  depends_on = [terraform_data.input_checks]
}

# Fixed size: every job has one worker per node and takes all of its GPUs, so autoscaling has nothing to do.
resource "nebius_mk8s_v1_node_group" "gpu" {
  parent_id        = nebius_mk8s_v1_cluster.this.id
  name             = "${var.name_prefix}-gpu"
  labels           = local.labels
  version          = var.k8s_version
  fixed_node_count = var.node_count

  template = {
    resources = {
      platform = var.platform
      preset   = var.preset
    }
    boot_disk = {
      type           = var.boot_disk_type
      size_gibibytes = var.boot_disk_size_gib
    }
    network_interfaces = [{
      subnet_id         = local.subnet_id
      public_ip_address = var.public_ip ? {} : null
    }]
    # The node image comes with this NVIDIA driver and CUDA: the GPU operator then needs no driver container.
    gpu_settings = {
      drivers_preset = var.drivers_preset
    }
    # The cuda12.8 driver preset exists only on Ubuntu 24.04 node images; the others keep the default.
    os                   = local.node_os
    gpu_cluster          = local.with_cluster ? { id = nebius_compute_v1_gpu_cluster.this[0].id } : null
    cloud_init_user_data = local.cloud_init
  }

  lifecycle {
    ignore_changes = [labels["pav-expires-at"], labels["pav-run-id"]]
  }
}

# Nebius' applications on the cluster (local.applications in checks.tf says which and why).
resource "nebius_applications_v1alpha1_k8s_release" "this" {
  for_each   = local.applications
  cluster_id = nebius_mk8s_v1_cluster.this.id
  parent_id  = var.parent_id

  application_name = each.key
  namespace        = each.key
  product_slug     = each.value

  depends_on = [nebius_mk8s_v1_node_group.gpu]
}

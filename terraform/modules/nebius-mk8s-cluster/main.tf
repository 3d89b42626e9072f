# Managed Kubernetes: a control plane, a fixed GPU node group (one job worker per node, all its GPUs),
# a small CPU node group for system pods, and Nebius' applications that make GPUs and InfiniBand usable.
module "base" {
  source = "../nebius-base"
  kind   = "mk8s"
  values = var.values
}

locals {
  v = module.base.spec.values

  # Node image OS: the cuda12.8 driver preset ships on Ubuntu 24.04 only; null keeps Nebius' default.
  node_os = local.v.drivers_preset == "cuda12.8" ? "ubuntu24.04" : null

  # Nebius' own applications (name: product), as its solution library installs them:
  # - the device plugin: the node image has the driver (drivers_preset), but nothing advertises the GPUs
  #   to the kubelet; without it no node shows nvidia.com/gpu and no job can be scheduled;
  # - NVIDIA's network operator when the nodes join a GPU cluster on a fabric: InfiniBand inside pods
  #   comes through its RDMA device plugin (the resource k8s_rdma_resource names).
  applications = merge(
    { nvidia-device-plugin = "nebius/nvidia-device-plugin" },
    module.base.spec.with_cluster ? { network-operator = "nebius/nvidia-network-operator" } : {},
  )

  # Only pods that tolerate it (the jobs, the GPU daemons) land on GPU nodes, while a CPU node group is
  # there to take the system pods; without one, nothing may keep them off.
  gpu_taints = local.v.system_node_count > 0 ? [{ key = "nvidia.com/gpu", value = "true", effect = "NO_SCHEDULE" }] : []

  # What outputs.tf reads.
  endpoint       = try(nebius_mk8s_v1_cluster.this.status.control_plane.endpoints.public_endpoint, "")
  ca_certificate = try(nebius_mk8s_v1_cluster.this.status.control_plane.auth.cluster_ca_certificate, "")
  cluster_id     = nebius_mk8s_v1_cluster.this.id
  gpu_cluster_id = try(module.base.gpu_cluster.id, "")
}

resource "nebius_mk8s_v1_cluster" "this" {
  parent_id = local.v.parent_id
  name      = "${local.v.name_prefix}-k8s"
  labels    = module.base.spec.labels

  control_plane = {
    subnet_id         = module.base.subnet_id
    version           = local.v.k8s_version
    etcd_cluster_size = local.v.etcd_cluster_size
    # The driver runs kubectl from outside the VPC.
    endpoints = {
      public_endpoint = {}
    }
  }

  lifecycle {
    ignore_changes = [labels["pav-expires-at"], labels["pav-run-id"]]
  }
}

# Fixed size: every job has one worker per node and takes all of its GPUs, so autoscaling has nothing to do.
resource "nebius_mk8s_v1_node_group" "gpu" {
  parent_id        = nebius_mk8s_v1_cluster.this.id
  name             = "${local.v.name_prefix}-gpu"
  labels           = module.base.spec.labels
  version          = local.v.k8s_version
  fixed_node_count = local.v.node_count

  template = {
    resources = {
      platform = local.v.platform
      preset   = local.v.preset
    }
    boot_disk = {
      type           = local.v.boot_disk_type
      size_gibibytes = local.v.boot_disk_size_gib
    }
    network_interfaces = [{
      subnet_id         = module.base.subnet_id
      public_ip_address = local.v.public_ip ? {} : null
    }]
    # The node image comes with this NVIDIA driver and CUDA: the device plugin needs no driver container.
    gpu_settings = {
      drivers_preset = local.v.drivers_preset
    }
    os                   = local.node_os
    gpu_cluster          = module.base.gpu_cluster
    taints               = local.gpu_taints
    filesystems          = module.base.filesystems
    cloud_init_user_data = module.base.user_data
  }

  lifecycle {
    ignore_changes = [labels["pav-expires-at"], labels["pav-run-id"]]
  }
}

# CoreDNS, the operators' controllers and MPIJob launchers: on GPU nodes they would take a GPU host's
# CPU and memory from the job and keep the node from draining.
resource "nebius_mk8s_v1_node_group" "system" {
  count            = local.v.system_node_count > 0 ? 1 : 0
  parent_id        = nebius_mk8s_v1_cluster.this.id
  name             = "${local.v.name_prefix}-system"
  labels           = module.base.spec.labels
  version          = local.v.k8s_version
  fixed_node_count = local.v.system_node_count

  template = {
    resources = {
      platform = module.base.spec.system_nodes.platform
      preset   = module.base.spec.system_nodes.preset
    }
    boot_disk = {
      type           = "NETWORK_SSD"
      size_gibibytes = module.base.spec.system_nodes.disk_gib
    }
    network_interfaces = [{
      subnet_id = module.base.subnet_id
    }]
  }

  lifecycle {
    ignore_changes = [labels["pav-expires-at"], labels["pav-run-id"]]
  }
}

# Nebius' applications on the cluster (local.applications says which and why).
resource "nebius_applications_v1alpha1_k8s_release" "this" {
  for_each   = local.applications
  cluster_id = nebius_mk8s_v1_cluster.this.id
  parent_id  = local.v.parent_id

  application_name = each.key
  namespace        = each.key
  product_slug     = each.value

  depends_on = [nebius_mk8s_v1_node_group.gpu, nebius_mk8s_v1_node_group.system]
}

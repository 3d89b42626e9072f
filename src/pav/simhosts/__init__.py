"""sim-hosts: simulated SSH hosts on this machine, for tests and the simulated
cluster environment.

Each host is a network namespace on a per-cluster bridge, plus a process
tree in its own mount/UTS/PID namespaces whose root is an overlay of the
real / (writes land in a per-host tmpfs, so nothing done inside a host can
change the real filesystem), running sshd with key-only root login.

Usage (every option also accepts --opt=value):
  sim-hosts net-up    --state-dir D --cluster ID --subnet-index K
  sim-hosts host-up   --state-dir D --index I --pubkey FILE [--name NAME]
  sim-hosts host-down --state-dir D --index I
  sim-hosts net-down  --state-dir D
  sim-hosts up        --state-dir D --cluster ID --subnet-index K --count N --pubkey FILE
  sim-hosts down      --state-dir D
  sim-hosts list      --state-dir D

Run as scripts/sim-hosts (what Terraform's local-exec in terraform/envs/sim
calls) or python -m pav.simhosts; root only. Errors are one line,
"sim-hosts: ..." on stderr, and exit 1; stdout holds only machine-readable
lines (host-up's record path, list's hosts).

Addresses: bridge pavbr-ID has 10.77.K.1/24 in the root namespace; host I
has 10.77.K.(10+I) on eth0 in netns pav-ID-I (veth pv-ID-I on the bridge).
No forwarding, NAT or default route: hosts reach only the bridge subnet.

State dir layout:
  sim-net.env          cluster id and subnet index, written by net-up
  hosts/NAME.json      {"name","index","ip","port","user","netns","pid","upper"}
  hosts/NAME.known_hosts   "IP ssh-ed25519 KEY" for pinning the host key
  run/I/               per-host runtime: name, pid, sshd_config, host.log,
                       host-init.sh (what runs as the host's PID 1)
  run/I/fs/            tmpfs: overlay upper/ and work/, and root/ (mountpoint
                       of the overlay, only inside the host's mount ns)
  locks/I.lock         serialises host-up/host-down of one index
  shared/              mounted read-write at /srv/pav-shared in every host (the
                       cluster's shared filesystem); removed by net-down
Besides, /run/lock/pav-sim-hosts.lock serialises netns and link changes
machine-wide (ip netns add/del race on the first creation of /run/netns).

Inside a host: `hostname` prints NAME, /etc/pav-sim-host holds NAME, and
ssh sessions get PAV_SIM_HOST=NAME in their environment. The system Python
keeps what it compiles from Ansible's module zips in /var/cache/pav-sim-pyc
(zipcache, loaded by a .pth file host-up writes).

Fault injection: PAV_SIM_FAIL_HOST=I makes host-up of index I fail (after
its namespace and sshd exist, so the cleanup path is what gets exercised).
PAV_SIM_DEAF_HOST=I brings host I up, then takes its link down: it exists (and
goes at teardown like any host) but never answers, like a VM that did not boot.
PAV_SIM_SSHD_WAIT_S (default 20) bounds the wait for a host's sshd.

Modules: cli (options, dispatch), cluster (net-up, net-down, up, down, list),
host (host-up, host-down), net (bridge, veth, netns through `ip`), state (the
state dir, its records and locks), faults, zipcache (copied into each host);
host-init.sh is the shell that runs as each host's PID 1.
"""

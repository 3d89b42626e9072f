#!/usr/bin/env bash
# PID 1 of one simulated host (copied to run/I/host-init.sh by sim-hosts host-up, so ps shows a short line).
# It runs inside the host's network namespace and fresh mount, UTS and PID namespaces, and ends up exec'ing
# sshd, which reaps orphans as PID 1 must.
# Arguments: host dir, name, ip, sshd config name, checkout to show read-only, the cluster's shared folder.
set -euo pipefail
hd=$1 name=$2 ip=$3 conf=$4 share=$5 shared=$6
r=$hd/fs/root
mount -t overlay overlay -o "lowerdir=/,upperdir=$hd/fs/upper,workdir=$hd/fs/work" "$r"
mount -t proc proc "$r/proc"
mount -t sysfs sysfs "$r/sys"
# A private /dev: only the basic nodes, its own pty instance and a fresh
# /dev/shm (torch worker processes need a large one).
mount -t tmpfs -o mode=755,nosuid,size=64k tmpfs "$r/dev"
mknod -m 666 "$r/dev/null" c 1 3
mknod -m 666 "$r/dev/zero" c 1 5
mknod -m 666 "$r/dev/full" c 1 7
mknod -m 666 "$r/dev/random" c 1 8
mknod -m 666 "$r/dev/urandom" c 1 9
mknod -m 666 "$r/dev/tty" c 5 0
mkdir -m 755 "$r/dev/pts"
mkdir -m 1777 "$r/dev/shm"
mount -t devpts -o newinstance,ptmxmode=0666,mode=620,gid=5 devpts "$r/dev/pts"
ln -s pts/ptmx "$r/dev/ptmx"
ln -s /proc/self/fd "$r/dev/fd"
ln -s /proc/self/fd/0 "$r/dev/stdin"
ln -s /proc/self/fd/1 "$r/dev/stdout"
ln -s /proc/self/fd/2 "$r/dev/stderr"
mount -t tmpfs -o mode=1777,nosuid,nodev,size=1g tmpfs "$r/dev/shm"
mount -t tmpfs -o mode=755,nosuid,nodev tmpfs "$r/run"
mkdir -m 755 "$r/run/sshd" "$r/run/lock"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$r/tmp"
# The checkout that made this host (and its .venv, whose Python runs the payload) stays visible, read-only,
# even where it lives under /tmp or /run, which each host gets fresh.
mkdir -p "$r$share"
mount --bind "$share" "$r$share"
mount -o remount,bind,ro "$r$share"
# The cluster's shared filesystem (what NFS or Lustre is on a real cluster): one folder of the state dir,
# read-write at the same path on every host.
mkdir -p "$r/srv/pav-shared"
mount --bind "$shared" "$r/srv/pav-shared"
hostname "$name"
echo "$name" >"$r/etc/hostname"
echo "$name" >"$r/etc/pav-sim-host"
printf "%s\t%s\n" "$ip" "$name" >>"$r/etc/hosts"
# The real host keys show through the overlay; every host needs its own.
rm -f "$r"/etc/ssh/ssh_host_*
ssh-keygen -q -t ed25519 -N "" -C "root@$name" -f "$r/etc/ssh/ssh_host_ed25519_key"
install -m 644 "$hd/sshd_config" "$r/etc/ssh/$conf"
# pivot_root and drop the old root instead of chroot: this mount namespace
# started as a copy of the machine's, holding copies of every other host's
# tmpfs and /run/netns entry, which would keep those alive after their
# host-down. Detaching the old tree releases them.
cd "$r"
pivot_root . .
umount -l .
cd /
exec /usr/sbin/sshd -D -e -f "/etc/ssh/$conf"

# pav-start-job.sh: start a command in the background on a host and leave its result in files, in POSIX sh.
# Pasted into a shell (the driver's installer, the role's own start task), where it defines the function
# only. The wait is one module run that blocks on the host (library/pav_facts_wait.py), where Ansible's async
# was a module run to start, one per poll and one to remove its job file, per host (issue 65).
#
# start_job JOB LIMIT_S ARGV...: ARGV from /, its stdin /dev/null, its output in JOB.out and JOB.err, its
# exit code in JOB.rc, written last (124 or 137: `timeout` ended it past LIMIT_S seconds, as NVML hangs on
# a GPU that fell off the bus). The background shell's pid goes in JOB.pid: a wait that finds it gone
# without JOB.rc fails at once. Every pipe of the caller is closed in the background: the task returns.
start_job() {
  sj_job=$1 sj_limit=$2
  shift 2
  rm -f -- "$sj_job.rc" "$sj_job.out" "$sj_job.err" "$sj_job.pid"
  # Ignored before the fork, so the job is born ignoring it: a script task runs over `ssh -tt`, whose
  # pseudo-terminal hangs up on the job's process group as the task returns.
  trap '' HUP
  # In a session of its own (setsid, as Ansible's async daemonizes its jobs): over the local connection the
  # job would otherwise share the Ansible worker's session and process group, which Ansible signals as a
  # group (killpg) when it ends a worker. Suite runs lost the read's shell, unexplained otherwise, on two
  # inventory hosts of one machine (tests/driver/test_split_machine.py).
  sj_setsid=$(command -v setsid || true)
  $sj_setsid /bin/sh -c '
    job=$1 limit=$2
    shift 2
    cd / || exit
    timeout -k 5 "$limit" "$@" >"$job.out" 2>"$job.err"
    echo "$?" >"$job.rc.new" && mv -f -- "$job.rc.new" "$job.rc"
  ' pav-start-job "$sj_job" "$sj_limit" "$@" </dev/null >/dev/null 2>&1 &
  echo "$!" >"$sj_job.pid"
  trap - HUP
}

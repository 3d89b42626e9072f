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
  (
    set +e
    cd / || exit
    timeout -k 5 "$sj_limit" "$@" >"$sj_job.out" 2>"$sj_job.err"
    echo "$?" >"$sj_job.rc.new" && mv -f -- "$sj_job.rc.new" "$sj_job.rc"
  ) </dev/null >/dev/null 2>&1 &
  echo "$!" >"$sj_job.pid"
  trap - HUP
}

# pav-safe-dir.sh: the one check of the tool's folders on a host (issue 62), in POSIX sh.
# Root runs what lies in them (the payload on every launch's PYTHONPATH, pav-mpirun, nccl-tests) and the
# verdict reads what is written there: a folder another account made first, or can write, would let it run
# code as root or forge results. Run as a script (`sh pav-safe-dir.sh [--make] DIR...`, the roles'
# ansible.builtin.script) or pasted into a shell (the driver's installer, every launch), where it defines
# the functions only.
#
# safe_dir [--make] DIR...: every folder on the way to DIR, and DIR itself, must be owned by root or
# this user and writable by no one else; a root-owned sticky folder (/tmp, /var/tmp) may lie on the way,
# never be DIR. With --make a missing part is made with a plain mkdir (never mkdir -p, which keeps what
# someone made first) and checked after it is made: one made by someone else in between is refused.
# Each made folder is printed as `made PATH`. A refusal is one line on stderr and exit 3.
# safe_tree DIR: DIR's contents: owned by root or this user, and nothing but links writable by others.

sd_uid=$(id -u)
sd_who=$([ "$sd_uid" = 0 ] || id -un)

safe_refuse() {
  echo "pav: unsafe folder: $1 is owned by $(stat -c '%U (uid %u), mode %a' -- "$1")$2;" \
    "it must be owned by root${sd_who:+ or $sd_who} and writable by no one else: remove it, or set pav_remote_dir" >&2
  exit 3
}

# One part, by lstat: a link must be root's or ours (a system's /var/run -> /run); what it leads to is then
# held to the same rules as a folder.
safe_part() {
  if [ -L "$1" ]; then
    case $(stat -c %u -- "$1") in 0|"$sd_uid") ;; *) safe_refuse "$1" " (a link)" ;; esac
  fi
  [ -d "$1" ] || safe_refuse "$1" " (not a folder)"
  set -- "$1" "$2" $(stat -L -c '%u %a' -- "$1")
  case $3 in 0|"$sd_uid") ;; *) safe_refuse "$1" "" ;; esac
  if [ $(( 0$4 & 022 )) -ne 0 ]; then
    # Others may write a folder on the way only when it is root's and sticky: nobody else can then rename
    # or remove what is made in it.
    if [ "$2" = last ] || [ "$3" != 0 ] || [ $(( 0$4 & 01000 )) -eq 0 ]; then
      safe_refuse "$1" ""
    fi
  fi
}

safe_dir() {
  sd_make=
  if [ "${1-}" = --make ]; then sd_make=1; shift; fi
  for sd_dir in "$@"; do
    case $sd_dir in
      /*) ;;
      *) echo "pav: unsafe folder: $sd_dir is not an absolute path; set pav_remote_dir to one" >&2; exit 3 ;;
    esac
    sd_rest=${sd_dir#/}
    sd_path=
    while [ -n "$sd_rest" ]; do
      sd_part=${sd_rest%%/*}
      case $sd_rest in */*) sd_rest=${sd_rest#*/} ;; *) sd_rest= ;; esac
      [ -n "$sd_part" ] || continue
      sd_path=$sd_path/$sd_part
      if [ -n "$sd_make" ] && [ ! -e "$sd_path" ] && [ ! -L "$sd_path" ]; then
        if mkdir -m 0755 -- "$sd_path" 2>/dev/null; then
          echo "made $sd_path"
        elif [ ! -e "$sd_path" ]; then
          echo "pav: cannot make folder $sd_path as ${sd_who:-root} (uid $sd_uid);" \
            "set pav_remote_dir to a folder this user may make or owns" >&2
          exit 3
        fi
      fi
      [ -e "$sd_path" ] || [ -L "$sd_path" ] || break
      if [ -n "$sd_rest" ]; then safe_part "$sd_path" way; else safe_part "$sd_path" last; fi
    done
  done
}

safe_tree() {
  sd_bad=$(find "$1" \( ! -user 0 ! -user "$sd_uid" \) -print -quit -o ! -type l -perm /022 -print -quit)
  if [ -n "$sd_bad" ]; then safe_refuse "$sd_bad" ""; fi
}

# safe_code DIR...: each DIR that exists (what root runs: the payload, pav-mpirun, nccl-tests), and all in it.
safe_code() {
  for sd_code in "$@"; do
    if [ -e "$sd_code" ] || [ -L "$sd_code" ]; then
      safe_dir "$sd_code"
      safe_tree "$sd_code"
    fi
  done
}

if [ "${0##*/}" = pav-safe-dir.sh ]; then
  set -eu
  safe_dir "$@"
fi

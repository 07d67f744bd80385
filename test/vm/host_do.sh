# Sourced by the shell scripts that test/vm/two_hosts runs in its guests.
# host_do REQUEST...: one request to the host over the guest's virtio serial
# port named "ctl" (kill A|B, link A|B off|on, barrier NAME; see
# test/vm/two_hosts); returns once the host answered, fails unless "ok".
host_do() {
  local p port="" answer fd
  for p in /sys/class/virtio-ports/*; do
    [[ $(cat "$p/name" 2>/dev/null) == ctl ]] && port=/dev/$(basename "$p")
  done
  [[ -n $port ]] || { echo "no ctl port: not under test/vm/two_hosts" >&2; return 1; }
  exec {fd}<>"$port"
  echo "$*" >&"$fd"
  read -r answer <&"$fd"
  exec {fd}>&-
  [[ $answer == ok ]] || { echo "host: $* -> $answer" >&2; return 1; }
}

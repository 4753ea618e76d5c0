# tmux.sh - the one tmux driver of the full-screen tests (sourced after
# tests/lib.sh). Each script gets a tmux server of its own (tmux -L, a
# socket named after the script and its pid), one detached pane "k3" in
# which a plain shell or k3 itself runs; keys go in with send-keys, the
# screen comes back with capture-pane.

# have_tmux NAME: 0 when tmux is installed, else a FAIL line for NAME and 1.
have_tmux() {
    command -v tmux >/dev/null 2>&1 && return 0
    echo "FAIL $1: tmux is not installed"
    return 1
}

# tmux_start SOCKNAME COLS ROWS COMMAND: the server and its pane, running
# COMMAND (a shell line); the server is killed when the script exits (a
# script with a trap of its own calls tmux_stop in it).
tmux_start() {
    tmux_server "$1"
    $TM new-session -d -s k3 -x "$2" -y "$3" "$4"
}

# tmux_replace COLS ROWS COMMAND: a fresh pane "k3" in the same server.
# The new session starts (as k3new) before the old one is killed: killing
# a server's last session makes it exit, and a new-session sent to a
# server still on its way out dies with it (an empty screen).
tmux_replace() {
    $TM new-session -d -s k3new -x "$1" -y "$2" "$3"
    $TM kill-session -t k3 2>/dev/null
    $TM rename-session -t k3new k3
}

# tmux_stop: the server and its socket file.
tmux_stop() {
    [ -n "$TM" ] || return 0
    tmux_sock=$($TM display -p '#{socket_path}' 2>/dev/null)
    $TM kill-server >/dev/null 2>&1
    [ -n "$tmux_sock" ] && rm -f "$tmux_sock"
    return 0
}

# cap [capture-pane flags]: the pane's screen as text.
cap() { $TM capture-pane -t k3 -p "$@"; }

# wait_for REGEX SECONDS: poll the screen every 0.1 s until a line matches
# REGEX; the last screen stays in $SCREEN (default tests/out/screen.txt).
wait_for() {
    wait_i=0
    while [ $wait_i -lt $(($2 * 10)) ]; do
        cap > "${SCREEN:-tests/out/screen.txt}"
        grep -q -- "$1" "${SCREEN:-tests/out/screen.txt}" && return 0
        sleep 0.1
        wait_i=$((wait_i + 1))
    done
    return 1
}

# send TEXT: type TEXT literally, then Enter.
send() { $TM send-keys -t k3 -l "$1"; $TM send-keys -t k3 Enter; }

# key KEY...: named keys (Enter, C-c, Up, F1 ...).
key() { $TM send-keys -t k3 "$@"; }

# tmux_server SOCKNAME: the script's own server (sessions started later
# with $TM new-session); killed when the script exits.
tmux_server() {
    SOCK=$1$$
    TM="tmux -L $SOCK"
    trap tmux_stop EXIT INT TERM
}

# bash completion for lmd (installed as /usr/share/bash-completion/completions/lmd)
# Completes commands, each command's flags, and model names from `lmd list`.

_lmd_models() {
  # First column of `lmd list`, without the header; quiet when the daemon is not running.
  lmd list 2>/dev/null | awk 'NR > 1 { print $1 }'
}

_lmd() {
  local cur prev words cword
  if declare -F _init_completion >/dev/null 2>&1; then
    _init_completion -n : || return  # model names hold ":" (tiny:latest)
  else
    cur="${COMP_WORDS[COMP_CWORD]}"
    prev="${COMP_WORDS[COMP_CWORD-1]}"
    words=("${COMP_WORDS[@]}")
    cword=$COMP_CWORD
  fi

  local commands="serve gateway run pull push create list ls ps show cp rm stop doctor reload version help"
  if [[ $cword -eq 1 ]]; then
    COMPREPLY=($(compgen -W "$commands --help --version" -- "$cur"))
    return
  fi

  local command="${words[1]}"
  local flags="--help"
  case "$command" in
    run) flags="--help --verbose --format --keepalive --nowordwrap" ;;
    pull | push) flags="--help --insecure" ;;
    create) flags="--help --file -f" ;;
    show) flags="--help --modelfile --parameters --template --system --license --verbose" ;;
  esac

  case "$prev" in
    -f | --file)
      COMPREPLY=($(compgen -f -- "$cur"))
      return
      ;;
    --format)
      COMPREPLY=($(compgen -W "json" -- "$cur"))
      return
      ;;
    --keepalive)
      COMPREPLY=($(compgen -W "5m 30m 1h -1 0" -- "$cur"))
      return
      ;;
  esac

  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$flags" -- "$cur"))
    return
  fi

  case "$command" in
    run | push | show | cp | rm | stop)
      COMPREPLY=($(compgen -W "$(_lmd_models)" -- "$cur"))
      declare -F __ltrim_colon_completions >/dev/null 2>&1 && __ltrim_colon_completions "$cur"
      ;;
  esac
}

complete -F _lmd lmd

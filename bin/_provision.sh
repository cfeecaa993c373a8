# Sourced by bin/test: installs the system tools of tests/support/system-tools.txt that are
# missing, where it can (root with apt-get). Elsewhere it says what is missing and how to get
# it; the tests that need those tools then skip (and fail under CI=true).
provision_missing=()
while read -r cmd pkg _; do
  case "$cmd" in ''|'#'*) continue ;; esac
  command -v "$cmd" >/dev/null 2>&1 || provision_missing+=("$pkg")
done < "$conch_root/tests/support/system-tools.txt"
if [ "${#provision_missing[@]}" -gt 0 ] && [ "${CONCH_TEST_NO_PROVISION:-}" != 1 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "bin/test: installing ${provision_missing[*]} (apt-get)" >&2
    if apt-get update -qq >/dev/null &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        "${provision_missing[@]}" >/dev/null; then
      provision_missing=()
    else
      echo "bin/test: apt-get could not install ${provision_missing[*]}" >&2
    fi
  fi
fi
if [ "${#provision_missing[@]}" -gt 0 ]; then
  echo "bin/test: missing ${provision_missing[*]}; the tests that need them will skip" \
    "(install with: sudo apt-get install ${provision_missing[*]})" >&2
fi
unset provision_missing

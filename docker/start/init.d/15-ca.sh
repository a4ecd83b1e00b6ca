# shellcheck shell=bash
# CA_BUNDLE_FILE: an extra certificate authority (PEM, one or more certificates, e.g. a
# TLS-inspecting proxy's), mounted into the container and trusted from start on by pip,
# requests, curl, git and apt: added to the system store by update-ca-certificates (the image's
# ENV points pip and requests at that store too). Read like any path NB_USER may have written
# (safe_paths.py: a regular file of at most 1 MiB, no link followed from a writable place);
# anything but certificates stops the start with one line, and the file's content is never
# printed (a private key mounted by mistake must not reach a log).
if [ -n "${CA_BUNDLE_FILE:-}" ]; then
  ca_dir=/usr/local/share/ca-certificates/pytorch-cuda
  ca_pem=$(python3 -I "$PYTORCH_CUDA_LIB/shared/safe_paths.py" read --max-bytes 1048576 "$CA_BUNDLE_FILE" \
    2>&1) || startup_die "CA_BUNDLE_FILE=$CA_BUNDLE_FILE cannot be read: $ca_pem"
  if grep -q 'PRIVATE KEY' <<<"$ca_pem"; then
    startup_die "CA_BUNDLE_FILE=$CA_BUNDLE_FILE holds a private key: mount the CA's certificate only"
  fi
  if ! { rm -rf "$ca_dir" && mkdir -p "$ca_dir"; }; then
    startup_die "CA_BUNDLE_FILE: cannot write $ca_dir (a read-only root filesystem?)"
  fi
  # one certificate a file: update-ca-certificates and the hashed directory read one each
  awk -v dir="$ca_dir" '
    /-----BEGIN CERTIFICATE-----/ { n++; out = sprintf("%s/extra-%03d.crt", dir, n) }
    out { print > out }
    /-----END CERTIFICATE-----/ { close(out); out = "" }
  ' <<<"$ca_pem"
  ca_count=0
  for ca_cert in "$ca_dir"/*.crt; do
    [ -f "$ca_cert" ] || continue
    openssl x509 -noout -in "$ca_cert" 2>/dev/null \
      || startup_die "CA_BUNDLE_FILE=$CA_BUNDLE_FILE: certificate $((ca_count + 1)) is not valid PEM"
    ca_count=$((ca_count + 1))
  done
  [ "$ca_count" -gt 0 ] \
    || startup_die "CA_BUNDLE_FILE=$CA_BUNDLE_FILE holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
  update-ca-certificates >/dev/null 2>&1 \
    || startup_die "CA_BUNDLE_FILE: update-ca-certificates failed (a read-only root filesystem?)"
  startup_log INFO "CA_BUNDLE_FILE: $ca_count certificate(s) from $CA_BUNDLE_FILE trusted by pip, requests, curl and git"
  unset ca_dir ca_pem ca_cert ca_count
fi

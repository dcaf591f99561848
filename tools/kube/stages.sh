# shellcheck shell=bash
# dispatch's own kwok stages, sourced by tools/kube/up. They end a Running pod the way a kubelet
# would report it, with an exit code and a reason chosen by the test:
#
# - by annotating a running pod:   dispatch.test/exit-code=N   [dispatch.test/reason=OOMKilled]
#   (kubectl annotate pod P dispatch.test/exit-code=137 dispatch.test/reason=OOMKilled)
# - or from the submission, through the first container's environment, which replacement pods
#   that a Job creates carry too: DISPATCH_KWOK_EXIT_CODE=N, DISPATCH_KWOK_REASON=..., and
#   DISPATCH_KWOK_RUN_FOR=<Go duration, e.g. 5s> to stay Running that long first.
#
# Exit code 0 makes the pod Succeeded (reason Completed), any other Failed (reason Error unless
# given; OOMKilled for 137 is up to the test). The annotation wins over the environment. A pod
# with neither stays Running until it is deleted.

# The status a pod gets when it ends; $code and $reason come from the annotation or the env.
_dispatch_exit_status() {
  cat <<'EOF'
    statusTemplate: |
      {{ $now := Now }}
      {{ $code := "" }}
      {{ $reason := "" }}
      {{ range .spec.containers }}{{ range .env }}
      {{ if eq .name "DISPATCH_KWOK_EXIT_CODE" }}{{ $code = .value }}{{ end }}
      {{ if eq .name "DISPATCH_KWOK_REASON" }}{{ $reason = .value }}{{ end }}
      {{ end }}{{ end }}
      {{ $annotations := or .metadata.annotations dict }}
      {{ with index $annotations "dispatch.test/exit-code" }}{{ $code = . }}{{ end }}
      {{ with index $annotations "dispatch.test/reason" }}{{ $reason = . }}{{ end }}
      {{ if not $reason }}{{ if eq $code "0" }}{{ $reason = "Completed" }}{{ else }}{{ $reason = "Error" }}{{ end }}{{ end }}
      {{ $started := or .status.startTime $now }}
      conditions:
      - lastTransitionTime: {{ $now | Quote }}
        status: "True"
        type: Initialized
      - lastTransitionTime: {{ $now | Quote }}
        status: "False"
        reason: PodCompleted
        type: Ready
      - lastTransitionTime: {{ $now | Quote }}
        status: "False"
        reason: PodCompleted
        type: ContainersReady
      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: false
        started: false
        restartCount: 0
        state:
          terminated:
            exitCode: {{ $code }}
            reason: {{ $reason | Quote }}
            startedAt: {{ $started | Quote }}
            finishedAt: {{ $now | Quote }}
      {{ end }}
      phase: {{ if eq $code "0" }}Succeeded{{ else }}Failed{{ end }}
EOF
}

# The head of a Stage named $1, for a Running pod not being deleted whose exit-code annotation
# is $2 (Exists or DoesNotExist); the caller goes on with the rest of the selector.
_dispatch_running_pod() {
  cat <<EOF
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: $1
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: '.metadata.deletionTimestamp', operator: DoesNotExist}
    - {key: '.status.phase', operator: In, values: [Running]}
    - {key: '.metadata.annotations["dispatch.test/exit-code"]', operator: $2}
EOF
}

dispatch_stages() {
  _dispatch_running_pod dispatch-pod-exit-annotation Exists
  cat <<'EOF'
  next:
EOF
  _dispatch_exit_status
  echo ---
  _dispatch_running_pod dispatch-pod-exit-env DoesNotExist
  cat <<'EOF'
    - {key: '.spec.containers.[0].env // [] | .[] | select(.name == "DISPATCH_KWOK_EXIT_CODE") | .value', operator: Exists}
  delay:
    durationMilliseconds: 0
    durationFrom:
      expressionFrom: '.spec.containers.[0].env // [] | .[] | select(.name == "DISPATCH_KWOK_RUN_FOR") | .value'
  next:
EOF
  _dispatch_exit_status
}

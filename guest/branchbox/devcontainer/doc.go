// Package devcontainer reads the input side of a managed Dev Containers
// launch (Contract: BranchBox managed runtime manifest, "Preloaded service
// images"): the repository's devcontainer.json and the Compose files it
// names, read on openat2 descriptors below the repository (no symlink, no
// escape), parsed with compose-go v2 and never with a YAML parser of our
// own. Everything the contract refuses before startup is refused here,
// each refusal a *branchbox.RuleError naming its rule and the file: indirect
// Compose includes (include, extends, env_file, label_file, configs and
// secrets read from a file or variable), any
// interpolation ($VAR, ${VAR}; "$$" is Compose's literal dollar and stays),
// and a service_images map that does not bind exactly the runnable
// services, or binds one to anything but an immutable image reference.
package devcontainer

// check.cjs — deploy/'s manifests, checked the way the API server and an
// operator would: every object against the Kubernetes API schema of its kind
// (kubernetes-models' validators, generated from the official OpenAPI
// document), unknown fields refused as `kubectl apply` (strict field
// validation) refuses them, then fairgate's own rules: the embedded policy
// passes `fairgatectl policy check`, the agent's capabilities are exactly
// `fairgated --capabilities`, the image is the one deploy/build-image.sh
// builds, metrics stay node-local or bind the node's address behind a token
// from a Secret, the probes and mounts are the ones fairgated needs, and
// vLLM runs the way the policy assumes.
//
//   node check.cjs --fairgated BIN --fairgatectl BIN --image NAME
//                  [--unit FILE] FILE.yaml...        one line per problem, exit 1
//   node check.cjs --describe FILE.yaml              the agent pod as JSON (the
//                  image test runs it under podman with exactly these settings)
//
// Run with NODE_PATH at the node_modules scripts/deps.sh installs.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const { execFileSync } = require('child_process');
const yaml = require('js-yaml');

const modelsDir = path.dirname(require.resolve('kubernetes-models/package.json'));
const problems = [];
const problem = (where, msg) => problems.push(`${where}: ${msg}`);

// ---- schema ----

// apiVersion "apps/v1", kind "DaemonSet" -> IoK8sApiAppsV1DaemonSet
function schemaFor(apiVersion, kind) {
	const [group, version] = apiVersion.includes('/') ? apiVersion.split('/') : ['core', apiVersion];
	const g = group.split('.')[0];
	const name = `IoK8sApi${g[0].toUpperCase()}${g.slice(1)}${version[0].toUpperCase()}${version.slice(1)}${kind}`;
	const file = path.join(modelsDir, '_schemas', `${name}.js`);
	return fs.existsSync(file) ? require(file).validate : null;
}

// The OpenAPI schema leaves additionalProperties open; the API server drops
// (kubectl: refuses) fields it does not know. A validator reads every field
// its schema knows, so a field it never read is one the schema does not know.
// One proxy (and one set of fields read) per object, however often the
// validator reaches it.
function watched(value, ptr, reads) {
	if (value === null || typeof value !== 'object') return value;
	let w = reads.get(value);
	if (!w) {
		const seen = new Set();
		const proxy = new Proxy(value, {
			get(target, key, recv) {
				const v = Reflect.get(target, key, recv);
				if (typeof key !== 'string') return v;
				seen.add(key);
				return v !== null && typeof v === 'object' ? watched(v, `${ptr}/${key}`, reads) : v;
			},
		});
		w = { value, ptr, seen, proxy };
		reads.set(value, w);
	}
	return w.proxy;
}

// The generated validators carry no messages: say what the keyword means.
function describeError(e) {
	const p = e.params || {};
	switch (e.keyword) {
	case 'type': return `must be ${p.type}`;
	case 'enum': return `must be one of ${(p.allowedValues || []).join(', ')}`;
	case 'required': return `must have required property '${p.missingProperty}'`;
	case 'format': return `must be a ${p.format}`;
	case 'pattern': return `must match ${p.pattern}`;
	case 'oneOf': case 'anyOf': return 'matches none of the forms the schema allows';
	default: return e.message || `fails ${e.keyword} ${JSON.stringify(p)}`;
	}
}

function checkSchema(where, doc) {
	if (!doc || typeof doc !== 'object' || !doc.apiVersion || !doc.kind)
		return problem(where, 'not a Kubernetes object (apiVersion and kind)');
	const validate = schemaFor(String(doc.apiVersion), String(doc.kind));
	if (!validate) return problem(where, `no API schema for ${doc.apiVersion} ${doc.kind}`);
	const reads = new Map();
	if (!validate(watched(doc, '', reads))) {
		for (const e of validate.errors) problem(where, `${e.instancePath || '/'} ${describeError(e)}`);
		return;
	}
	for (const { value, ptr, seen } of reads.values())
		if (!Array.isArray(value))
			for (const k of Object.keys(value))
				if (!seen.has(k)) problem(where, `${ptr}/${k}: unknown field (not in the ${doc.kind} schema)`);
}

// ---- the documents ----

function load(file) {
	let docs;
	try {
		docs = yaml.loadAll(fs.readFileSync(file, 'utf8'));
	} catch (e) {
		problem(file, `not YAML: ${e.message.split('\n')[0]}`);
		return [];
	}
	return docs.filter((d) => d !== null && d !== undefined).map((doc, i) => ({
		doc, where: `${path.basename(file)}: ${doc && doc.kind ? `${doc.kind}/${doc.metadata && doc.metadata.name}` : `document ${i + 1}`}`,
	}));
}

const byKind = (all, kind, name) => all.find((d) => d.doc.kind === kind && (!name || (d.doc.metadata || {}).name === name));
const podOf = (d) => d && d.doc.spec && d.doc.spec.template && d.doc.spec.template.spec;

// "--flag VALUE" or "--flag=VALUE" in an argument list
function flag(args, name) {
	for (let i = 0; i < args.length; i++) {
		if (args[i] === name) return i + 1 < args.length ? String(args[i + 1]) : '';
		if (String(args[i]).startsWith(name + '=')) return String(args[i]).slice(name.length + 1);
	}
	return undefined;
}
const argv = (c) => [...(c.command || []), ...(c.args || [])].map(String);

// The file a mounted ConfigMap or Secret key becomes: {volume, key, text}.
function mountedFile(pod, container, file, all) {
	for (const m of container.volumeMounts || []) {
		const dir = m.mountPath.replace(/\/$/, '') + '/';
		if (!file.startsWith(dir)) continue;
		const vol = (pod.volumes || []).find((v) => v.name === m.name) || {};
		const key = file.slice(dir.length);
		if (vol.configMap) {
			const cm = byKind(all, 'ConfigMap', vol.configMap.name);
			return { what: `ConfigMap ${vol.configMap.name}`, key, text: cm && (cm.doc.data || {})[key] };
		}
		if (vol.secret) {
			const s = byKind(all, 'Secret', vol.secret.secretName);
			const data = s && { ...Object.fromEntries(Object.entries(s.doc.data || {})
				.map(([k, v]) => [k, Buffer.from(String(v), 'base64').toString()])), ...(s.doc.stringData || {}) };
			return { what: `Secret ${vol.secret.secretName}`, key, text: data && data[key] };
		}
		return { what: `volume ${m.name}`, key, text: undefined };
	}
	return { what: 'no volume', key: file, text: undefined };
}

function hostMount(pod, container, hostPath) {
	for (const m of container.volumeMounts || []) {
		const vol = (pod.volumes || []).find((v) => v.name === m.name) || {};
		if (vol.hostPath && vol.hostPath.path === hostPath) return m;
	}
	return null;
}

// ---- fairgate's rules ----

function agentContainer(pod, image) {
	return (pod.containers || []).find((c) => argv(c)[0] === '/usr/local/bin/fairgated') ||
		(pod.containers || []).find((c) => c.image === image);
}

function checkAgent(all, opts) {
	const ds = all.find((d) => d.doc.kind === 'DaemonSet' && (podOf(d) || {}).containers &&
		podOf(d).containers.some((c) => c.image === opts.image || argv(c)[0] === '/usr/local/bin/fairgated'));
	if (!ds) return problem('manifests', `no DaemonSet runs fairgated (${opts.image})`);
	const w = ds.where, pod = podOf(ds), c = agentContainer(pod, opts.image);
	const sc = c.securityContext || {}, caps = sc.capabilities || {};

	for (const k of [...(pod.initContainers || []), ...pod.containers].filter((k) => k.image === opts.image || argv(k)[0] === '/usr/local/bin/fairgated')) {
		if (k.image !== opts.image) problem(w, `container ${k.name} runs ${k.image}, not ${opts.image} (deploy/build-image.sh)`);
		if (k.imagePullPolicy !== 'IfNotPresent')
			problem(w, `container ${k.name}: imagePullPolicy ${k.imagePullPolicy || '(default)'}, want IfNotPresent (the image is loaded on the node, never pulled)`);
	}
	if (pod.hostNetwork !== true) problem(w, 'hostNetwork must be true (XDP on the node NIC, steer in the node namespace)');

	// capabilities: exactly what fairgated says it needs
	const want = opts.caps.map((n) => n.replace(/^CAP_/, '')).sort();
	const got = (caps.add || []).map(String).map((n) => n.replace(/^CAP_/, '')).sort();
	if (want.join() !== got.join()) problem(w, `capabilities.add [${got}] != fairgated --capabilities [${want}]`);
	if ((caps.drop || []).join() !== 'ALL') problem(w, 'capabilities.drop must be [ALL] (only what fairgated needs)');
	if (sc.privileged) problem(w, 'the agent must not be privileged (it needs three capabilities)');
	if (sc.allowPrivilegeEscalation !== false) problem(w, 'allowPrivilegeEscalation must be false');
	if (!sc.seccompProfile || sc.seccompProfile.type !== 'Unconfined')
		problem(w, 'seccompProfile must be Unconfined: default profiles allow bpf() only with CAP_SYS_ADMIN');
	if (!sc.appArmorProfile || sc.appArmorProfile.type !== 'Unconfined')
		problem(w, 'appArmorProfile must be Unconfined: the default profile denies writes under /sys/fs/bpf');
	const ann = ((ds.doc.spec.template.metadata || {}).annotations || {})[`container.apparmor.security.beta.kubernetes.io/${c.name}`];
	if (ann !== undefined && ann !== 'unconfined') problem(w, `the AppArmor annotation (${ann}) disagrees with appArmorProfile`);

	// the policy it reads, and checks
	const args = argv(c);
	const pf = flag(args, '--policy'), tf = flag(args, '--tenants');
	if (!pf) return problem(w, 'fairgated is not given --policy');
	const policy = mountedFile(pod, c, pf, all);
	const tenants = tf ? mountedFile(pod, c, tf, all) : null;
	if (typeof policy.text !== 'string') return problem(w, `--policy ${pf}: no key ${policy.key} in ${policy.what}`);
	if (tenants && typeof tenants.text !== 'string') return problem(w, `--tenants ${tf}: no key ${tenants.key} in ${tenants.what}`);
	const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'fg-manifest-'));
	let parsed = null;
	try {
		fs.writeFileSync(path.join(tmp, 'policy.yaml'), policy.text);
		const cmd = ['policy', 'check', path.join(tmp, 'policy.yaml'), '--json'];
		if (tenants) {
			fs.writeFileSync(path.join(tmp, 'tenants.yaml'), tenants.text);
			cmd.push('--tenants', path.join(tmp, 'tenants.yaml'));
		}
		try {
			execFileSync(opts.fairgatectl, cmd, { stdio: ['ignore', 'pipe', 'pipe'] });
		} catch (e) {
			const out = JSON.parse(String(e.stdout || '{}'));
			problem(w, `fairgatectl policy check: ${out.text || e.message}`
				.replaceAll(path.join(tmp, 'policy.yaml'), `${policy.what} ${policy.key}`)
				.replaceAll(path.join(tmp, 'tenants.yaml'), tenants ? `${tenants.what} ${tenants.key}` : ''));
		}
		parsed = yaml.load(policy.text) || {};
	} finally {
		fs.rmSync(tmp, { recursive: true, force: true });
	}
	const agent = (parsed && parsed.agent) || {};

	// metrics node-local, or on the node's address (never every address)
	// behind a bearer token from a Secret the pod cannot start without
	const mlisten = String(agent.metrics_listen || '127.0.0.1:9464');
	const mhost = mlisten.replace(/:\d+$/, '').replace(/^\[|\]$/g, '');
	const ma = flag(args, '--metrics-address');
	if (agent.metrics_listen !== 'off' && ma !== undefined) {
		const envName = /^\$\((\w+)\)$/.test(ma) ? ma.slice(2, -1) : null;
		const env = (c.env || []).find((e) => e.name === envName);
		if (!env || !env.valueFrom || !env.valueFrom.fieldRef || env.valueFrom.fieldRef.fieldPath !== 'status.hostIP')
			problem(w, 'metrics must bind the node address: --metrics-address $(VAR) with VAR from fieldRef status.hostIP');
	} else if (agent.metrics_listen !== 'off' && !/^(127\.\d+\.\d+\.\d+|::1|localhost)$/.test(mhost)) {
		problem(w, `metrics on ${mlisten}: keep agent.metrics_listen on loopback or bind the node address (--metrics-address)`);
	}
	if (agent.metrics_listen !== 'off' && ma !== undefined) {
		const tok = agent.metrics_token_file;
		const m = tok && (c.volumeMounts || []).find((v) => String(tok).startsWith(v.mountPath.replace(/\/$/, '') + '/'));
		const vol = m && (pod.volumes || []).find((v) => v.name === m.name);
		if (!tok) problem(w, 'metrics on the node address need agent.metrics_token_file: /metrics names every tenant');
		else if (!vol || !vol.secret) problem(w, `agent.metrics_token_file ${tok} must come from a Secret volume`);
		else if (vol.secret.optional) problem(w, `agent.metrics_token_file ${tok}: Secret ${vol.secret.secretName} must not be optional (without the token the pod should wait at the kubelet, which names the Secret, not crash-loop)`);
	}
	const mport = mlisten.split(':').pop();
	if (agent.metrics_listen !== 'off') {
		const port = (c.ports || []).find((p) => p.name === 'metrics');
		if (!port || String(port.containerPort) !== mport) problem(w, `containerPort "metrics" must be the policy's metrics port ${mport}`);
		const pa = ((ds.doc.spec.template.metadata || {}).annotations || {})['prometheus.io/port'];
		if (pa !== undefined && pa !== mport) problem(w, `prometheus.io/port ${pa} != the policy's metrics port ${mport}`);
	}

	// bpffs from the node, mounted there by a privileged init container
	const bpf = hostMount(pod, c, '/sys/fs/bpf');
	if (!bpf || bpf.mountPath !== '/sys/fs/bpf') problem(w, 'the node\'s /sys/fs/bpf must be mounted at /sys/fs/bpf (pins outlive the pod)');
	else if (bpf.mountPropagation !== 'HostToContainer')
		problem(w, `/sys/fs/bpf: mountPropagation ${bpf.mountPropagation || 'None'}, want HostToContainer (Bidirectional needs privileged)`);
	const init = (pod.initContainers || []).find((k) => argv(k).includes('--mount-bpffs'));
	const ib = init && hostMount(pod, init, '/sys/fs/bpf');
	if (!init || !(init.securityContext || {}).privileged || !ib || ib.mountPropagation !== 'Bidirectional')
		problem(w, 'a privileged init container must run fairgated --mount-bpffs with /sys/fs/bpf Bidirectional');
	const run = hostMount(pod, c, '/run/fairgate');
	if (!run || run.mountPath !== '/run/fairgate') problem(w, 'the node\'s /run/fairgate must be mounted at /run/fairgate (the control socket)');
	if (!hostMount(pod, c, '/var/lib/fairgate')) problem(w, 'the node\'s /var/lib/fairgate must be mounted (the cache-salt secret)');
	for (const m of c.volumeMounts || []) if (m.subPath) problem(w, `${m.mountPath}: subPath mounts never see a ConfigMap or Secret change`);

	// probes that mean something
	const probe = (p) => (p && p.exec && (p.exec.command || []).map(String)) || [];
	const live = probe(c.livenessProbe), ready = probe(c.readinessProbe);
	if (!(live[0] || '').endsWith('fairgatectl') || live[1] !== 'health' || live.includes('--ready'))
		problem(w, 'livenessProbe must be `fairgatectl health` (the control socket answers)');
	if (!(ready[0] || '').endsWith('fairgatectl') || ready[1] !== 'health' || !ready.includes('--ready'))
		problem(w, 'readinessProbe must be `fairgatectl health --ready` (the proxy accepts)');

	const r = c.resources || {};
	const mem = (q) => { const m = /^(\d+)(Ki|Mi|Gi)?$/.exec(String(q || '')); return m ? Number(m[1]) * { Ki: 1 << 10, Mi: 1 << 20, Gi: 1 << 30, undefined: 1 }[m[2]] : NaN; };
	if (!(mem((r.limits || {}).memory) >= mem((r.requests || {}).memory)))
		problem(w, 'resources: limits.memory must be set, at least requests.memory');
	return agent;
}

function checkVllm(all, agent) {
	const d = all.find((x) => (podOf(x) || { containers: [] }).containers.some((c) => /vllm/.test(c.image || '')));
	if (!d) return;
	const pod = podOf(d), c = pod.containers.find((k) => /vllm/.test(k.image || '')), args = argv(c), w = d.where;
	const port = flag(args, '--port') || '8000';
	const ports = (agent.protected_ports || [8000]).map(String);
	if (pod.hostNetwork !== true) problem(w, 'vLLM must run with hostNetwork: steer sees only the node namespace\'s connections');
	if (!ports.includes(port)) problem(w, `vLLM's --port ${port} is not a protected port (${ports})`);
	if ((agent.mode || 'front') === 'transparent' && String(agent.engine || '').split(':').pop() !== port)
		problem(w, `agent.engine ${agent.engine} is not vLLM's port ${port}`);
	if (!args.includes('--enable-prompt-tokens-details'))
		problem(w, 'vLLM needs --enable-prompt-tokens-details (cached tokens are billed at a discount)');
	const sp = flag(args, '--scheduling-policy') || 'fcfs', es = agent.engine_scheduling || 'fcfs';
	if (sp !== es) problem(w, `vLLM --scheduling-policy ${sp} but the policy says agent.engine_scheduling: ${es}`);
	if (flag(args, '--api-key') !== undefined) problem(w, 'no --api-key: fairgated sends no engine key (clients\' keys never reach the engine)');
}

function checkUnit(file, caps) {
	const text = fs.readFileSync(file, 'utf8');
	const want = caps.slice().sort().join(' ');
	for (const key of ['AmbientCapabilities', 'CapabilityBoundingSet']) {
		const m = new RegExp(`^${key}=(.*)$`, 'm').exec(text);
		const got = m ? m[1].trim().split(/\s+/).sort().join(' ') : '(none)';
		if (got !== want) problem(path.basename(file), `${key}=${got} != fairgated --capabilities ${want}`);
	}
}

// ---- describe: the agent pod, for the image test ----

function describe(all) {
	const ds = all.find((d) => d.doc.kind === 'DaemonSet' && (podOf(d).containers || []).some((c) => argv(c)[0] === '/usr/local/bin/fairgated'));
	const pod = podOf(ds), c = agentContainer(pod, '');
	const mounts = (k) => (k.volumeMounts || []).map((m) => {
		const v = (pod.volumes || []).find((x) => x.name === m.name) || {};
		const src = v.hostPath ? { hostPath: v.hostPath.path } : v.configMap ? { configMap: v.configMap.name }
			: v.secret ? { secret: v.secret.secretName, optional: !!v.secret.optional } : { other: true };
		return { mountPath: m.mountPath, readOnly: !!m.readOnly, propagation: m.mountPropagation || 'None', ...src };
	});
	const files = {};
	for (const d of all.filter((x) => x.doc.kind === 'ConfigMap' || x.doc.kind === 'Secret'))
		files[`${d.doc.kind}/${d.doc.metadata.name}`] = { ...(d.doc.data || {}), ...(d.doc.stringData || {}) };
	const vllm = all.find((x) => (podOf(x) || { containers: [] }).containers.some((k) => /vllm/.test(k.image || '')));
	return {
		image: c.image, argv: argv(c), env: c.env || [], securityContext: c.securityContext || {},
		resources: c.resources || {}, mounts: mounts(c), files,
		liveness: c.livenessProbe.exec.command, readiness: c.readinessProbe.exec.command,
		init: (pod.initContainers || []).map((k) => ({ name: k.name, argv: argv(k), privileged: !!(k.securityContext || {}).privileged, mounts: mounts(k) })),
		vllm_args: vllm ? argv(vllm.doc.spec.template.spec.containers.find((k) => /vllm/.test(k.image))) : [],
	};
}

// ---- main ----

function main() {
	const a = process.argv.slice(2), opts = { files: [] };
	for (let i = 0; i < a.length; i++) {
		if (a[i] === '--describe') opts.describe = true;
		else if (['--fairgated', '--fairgatectl', '--image', '--unit'].includes(a[i])) opts[a[i].slice(2)] = a[++i];
		else opts.files.push(a[i]);
	}
	const all = opts.files.flatMap(load);
	if (opts.describe) {
		console.log(JSON.stringify(describe(all)));
		return 0;
	}
	for (const d of all) checkSchema(d.where, d.doc);
	opts.caps = String(execFileSync(opts.fairgated, ['--capabilities'])).trim().split('\n').map((l) => l.split('\t')[0]);
	const agent = checkAgent(all, opts) || {};
	checkVllm(all, agent);
	if (opts.unit) checkUnit(opts.unit, opts.caps);
	for (const p of problems) console.log(p);
	if (!problems.length) console.log(`ok: ${all.length} objects in ${opts.files.map((f) => path.basename(f)).join(', ')}`);
	return problems.length ? 1 : 0;
}
process.exitCode = main();

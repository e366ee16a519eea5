import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { Worker } from 'bullmq';
import { parseAllDocuments } from 'yaml';
import { closeRedisConnection, createRedisConnection } from '../queues/bullmq/redis-connection';
import { findStage } from '../queues/stage-kit/stage-registry';
import { defaultLockDurationMs } from '../queues/bullmq/worker-factory';
import { registerCatalogStages } from '../workers/stage-catalog';
import { createQueueTestKit } from './support/queue-test-kit';

/**
 * The deployment manifests: every YAML file under infra/ parses; every worker Deployment has a
 * KEDA ScaledObject on its queue's lists, with BullMQ's real key names; grace periods cover the
 * shutdown bound; resources, metrics ports and secrets line up.
 */

const infraDirectory = join(__dirname, '..', 'infra');
const k8sDirectory = join(infraDirectory, 'k8s');
const pipelineQueues = ['collect', 'augment', 'shard', 'distill', 'rl', 'replay', 'eval', 'gate', 'runs'];
/** Seconds between the shutdown bound and SIGKILL (closing, flushing logs, the forced-exit timer). */
const graceMarginSeconds = 15;

type Manifest = Record<string, any>;

function yamlFiles(directory: string): string[] {
  return readdirSync(directory).flatMap((name) => {
    const path = join(directory, name);
    if (statSync(path).isDirectory()) return yamlFiles(path);
    return /\.ya?ml$/.test(name) ? [path] : [];
  });
}

function loadDocuments(file: string): Manifest[] {
  return parseAllDocuments(readFileSync(file, 'utf8'))
    .map((document) => {
      if (document.errors.length > 0)
        throw new Error(
          `${relative(infraDirectory, file)}: ${document.errors.map((error) => error.message).join('; ')}`,
        );
      return document.toJS() as Manifest | null;
    })
    .filter((document): document is Manifest => document !== null);
}

function cpuCores(quantity: string): number {
  return quantity.endsWith('m') ? Number(quantity.slice(0, -1)) / 1000 : Number(quantity);
}

function argAfter(args: string[], flag: string): string | undefined {
  const index = args.indexOf(flag);
  return index >= 0 ? args[index + 1] : undefined;
}

describe('infra manifests', () => {
  const files = yamlFiles(infraDirectory);
  const byFile = new Map(files.map((file) => [relative(k8sDirectory, file), loadDocuments(file)]));
  const k8s = [...byFile].filter(([file]) => !file.startsWith('..')).flatMap(([, documents]) => documents);
  const ofKind = (kind: string) => k8s.filter((document) => document.kind === kind);
  const config = ofKind('ConfigMap').find((document) => document.metadata.name === 'hat-config')?.data as Record<
    string,
    string
  >;
  const deployments = ofKind('Deployment');
  const workers = deployments.filter(
    (deployment) => deployment.metadata.labels['app.kubernetes.io/component'] === 'worker',
  );
  const scaledObjects = ofKind('ScaledObject');
  const queueOf = (deployment: Manifest) =>
    argAfter(deployment.spec.template.spec.containers[0].args, '--stages') as string;

  beforeAll(() => registerCatalogStages());

  it('runs compose with a metrics port on every worker service, Prometheus scraping each of them, and a token-gated dashboard', () => {
    const compose = parseAllDocuments(readFileSync(join(infraDirectory, 'compose.yaml'), 'utf8'), {
      merge: true,
    })[0].toJS() as Manifest;
    const prometheus = byFile.get('../prometheus.yml')![0];
    const scraped = prometheus.scrape_configs[0].dns_sd_configs[0];
    const workerServices = Object.entries(compose.services as Record<string, Manifest>).filter(([name]) =>
      name.startsWith('worker-'),
    );
    expect(workerServices.map(([, service]) => argAfter(service.command, '--stages')).sort()).toEqual(
      [...pipelineQueues].sort(),
    );
    for (const [name, service] of workerServices) {
      const port = argAfter(service.command, '--metrics-port');
      expect([name, port, service.expose]).toEqual([name, String(scraped.port), [String(scraped.port)]]);
      // The worker listens on loopback by default; Prometheus scrapes from another container.
      expect([name, argAfter(service.command, '--metrics-host')]).toEqual([name, '0.0.0.0']);
    }
    expect([...scraped.names].sort()).toEqual(workerServices.map(([name]) => name).sort());
    const dashboard = compose.services.dashboard as Manifest;
    expect(dashboard.command[0]).toBe('dashboard');
    // Compose refuses to start without a token rather than serve an open dashboard.
    expect(dashboard.environment.HAT_DASHBOARD_TOKEN).toMatch(/^\$\{HAT_DASHBOARD_TOKEN:\?/);
  });

  it("lists each queue's job lock in the fault section of infra/README.md as the stage declares it", () => {
    const readme = readFileSync(join(infraDirectory, 'README.md'), 'utf8');
    const documented = new Map(
      [...readme.matchAll(/^\| (\w+) \| (\d+) s \| about (\d+) s \|$/gm)].map((match) => [
        match[1],
        { lockSeconds: Number(match[2]), handedBackSeconds: Number(match[3]) },
      ]),
    );
    for (const queue of pipelineQueues) {
      const lockMs = findStage(queue)?.queue?.lockDurationMs ?? defaultLockDurationMs;
      expect([queue, documented.get(queue)]).toEqual([
        queue,
        { lockSeconds: lockMs / 1000, handedBackSeconds: lockMs / 1000 + 30 },
      ]);
    }
  });

  it("renders the trainer's Job (infra/trainer/) into the trainer command the cluster runs, named by the request's hash", () => {
    const template = readFileSync(join(infraDirectory, 'trainer', 'k8s-job.yaml'), 'utf8');
    const values: Record<string, string> = {
      SUBMISSION_ID: '0123456789abcdef',
      REQUEST_URI: 's3://hat/runs/r1/handoffs/sft/request.json',
      TRAINER_IMAGE: 'registry.example/hat-trainer:1',
    };
    const rendered = template.replace(/\$\{([A-Z_]+)\}/g, (whole, name: string) => values[name] ?? whole);
    expect(rendered).not.toMatch(/\$\{[A-Z_]+\}/);
    const job = parseAllDocuments(rendered)[0].toJS() as {
      kind: string;
      metadata: { name: string; namespace: string };
      spec: {
        template: {
          spec: {
            containers: Array<{ image: string; args: string[]; envFrom: Array<Record<string, { name: string }>> }>;
          };
        };
      };
    };
    expect([job.kind, job.metadata.name, job.metadata.namespace]).toEqual(['Job', 'hat-train-0123456789abcdef', 'hat']);
    const container = job.spec.template.spec.containers[0];
    expect(container.args).toEqual([
      'python',
      '-m',
      'hat_trainer',
      'train',
      '--request',
      values.REQUEST_URI,
      '--out',
      '/checkpoints/0123456789abcdef',
      '--device',
      'cuda',
      '--register-marker',
    ]);
    expect(container.envFrom.map((source) => Object.values(source)[0].name)).toEqual(['hat-config', 'hat-secrets']);
  });

  it('parses every YAML file under infra/ (compose and Kubernetes)', () => {
    expect(files.map((file) => relative(infraDirectory, file))).toEqual(
      expect.arrayContaining(['compose.yaml', 'k8s/kustomization.yaml', 'k8s/secret.example.yaml']),
    );
    for (const documents of byFile.values()) expect(documents.length).toBeGreaterThan(0);
  });

  it('lists every manifest in the kustomization, except the example Secret and the optional ServiceMonitor', () => {
    const kustomization = byFile.get('kustomization.yaml')![0];
    const listed = (kustomization.resources as string[]).sort();
    const present = [...byFile.keys()]
      .filter(
        (file) =>
          !file.startsWith('..') &&
          !['kustomization.yaml', 'secret.example.yaml', 'servicemonitor.yaml'].includes(file),
      )
      .sort();
    expect(listed).toEqual(present);
    expect(config.HAT_REDIS_PREFIX).toBe('{hat}');
  });

  it('has one worker Deployment per pipeline queue, each with a ScaledObject on its wait and active lists', () => {
    expect(workers.map(queueOf).sort()).toEqual([...pipelineQueues].sort());
    for (const deployment of workers) {
      const queue = queueOf(deployment);
      expect(queue === 'runs' || findStage(queue) !== undefined).toBe(true);
      const container = deployment.spec.template.spec.containers[0];
      const scaled = scaledObjects.filter((object) => object.spec.scaleTargetRef.name === deployment.metadata.name);
      expect(scaled).toHaveLength(1);
      const [object] = scaled;
      const triggers = object.spec.triggers as Manifest[];
      expect(
        triggers.map((trigger) => [trigger.type, trigger.metadata.listName, trigger.authenticationRef.name]),
      ).toEqual([
        ['redis', `${config.HAT_REDIS_PREFIX}:${queue}:wait`, 'hat-redis'],
        ['redis', `${config.HAT_REDIS_PREFIX}:${queue}:active`, 'hat-redis'],
      ]);
      expect(Number(triggers[0].metadata.listLength)).toBeGreaterThan(0);
      // A replica holds up to --concurrency active jobs.
      expect(triggers[1].metadata.listLength).toBe(argAfter(container.args, '--concurrency'));
      expect(object.spec.maxReplicaCount).toBeGreaterThanOrEqual(Math.max(1, object.spec.minReplicaCount));
      // Delayed kickoffs are promoted only by a running worker: runs never scales to zero.
      if (queue === 'runs') expect(object.spec.minReplicaCount).toBeGreaterThanOrEqual(1);
      // The cooldown outlasts the longest backoff of a retried job (stage contracts' attempts and backoff).
      const stage = findStage(queue);
      const longestBackoffSeconds = stage
        ? ((stage.queue?.backoffMs ?? 1_000) * 2 ** ((stage.queue?.attempts ?? 5) - 1) * 1.5) / 1000
        : 0;
      expect(object.spec.cooldownPeriod).toBeGreaterThan(longestBackoffSeconds);
    }
  });

  it('gives every Deployment a termination grace period of HAT_SHUTDOWN_TIMEOUT_MS plus the margin', () => {
    expect(deployments.length).toBe(workers.length + 1);
    for (const deployment of deployments) {
      const container = deployment.spec.template.spec.containers[0];
      const override = (container.env as { name: string; value: string }[] | undefined)?.find(
        (entry) => entry.name === 'HAT_SHUTDOWN_TIMEOUT_MS',
      )?.value;
      const shutdownMs = Number(override ?? config.HAT_SHUTDOWN_TIMEOUT_MS);
      expect(shutdownMs).toBeGreaterThan(0);
      expect([deployment.metadata.name, deployment.spec.template.spec.terminationGracePeriodSeconds]).toEqual([
        deployment.metadata.name,
        Math.ceil(shutdownMs / 1000) + graceMarginSeconds,
      ]);
    }
  });

  it('sets requests and limits everywhere, with a core per sandboxed job for CPU-heavy stages', () => {
    for (const deployment of deployments) {
      const { resources } = deployment.spec.template.spec.containers[0];
      for (const bound of ['requests', 'limits'])
        expect(Object.keys(resources[bound]).sort()).toEqual(['cpu', 'memory']);
      expect(cpuCores(resources.limits.cpu)).toBeGreaterThanOrEqual(cpuCores(resources.requests.cpu));
    }
    const collectCpu = cpuCores(
      workers.find((deployment) => queueOf(deployment) === 'collect')!.spec.template.spec.containers[0].resources
        .requests.cpu,
    );
    for (const deployment of workers.filter((item) => findStage(queueOf(item))?.queue?.cpuHeavy)) {
      const container = deployment.spec.template.spec.containers[0];
      const cpu = cpuCores(container.resources.requests.cpu);
      expect(cpu).toBeGreaterThanOrEqual(Number(argAfter(container.args, '--concurrency')));
      expect(cpu).toBeGreaterThan(collectCpu);
    }
  });

  it('exposes the metrics port on every worker, annotated for scraping and selected by the metrics Service', () => {
    const service = ofKind('Service').find((item) => item.metadata.name === 'hat-worker-metrics')!;
    const servicePort = service.spec.ports.find((port: Manifest) => port.name === 'metrics');
    for (const deployment of workers) {
      const { template } = deployment.spec;
      const container = template.spec.containers[0];
      const port = Number(argAfter(container.args, '--metrics-port'));
      expect(container.ports).toContainEqual({ name: 'metrics', containerPort: port });
      expect(argAfter(container.args, '--metrics-host')).toBe('0.0.0.0');
      expect(template.metadata.annotations).toMatchObject({
        'prometheus.io/scrape': 'true',
        'prometheus.io/port': String(port),
        'prometheus.io/path': '/metrics',
      });
      expect(template.metadata.labels).toMatchObject(service.spec.selector);
      expect(servicePort.port).toBe(port);
    }
  });

  it('reads Redis and S3 settings from the Secret, whose example names every key with placeholders', () => {
    const [secret] = byFile.get('secret.example.yaml')!;
    const keys = Object.keys(secret.stringData as Record<string, string>);
    for (const value of Object.values(secret.stringData as Record<string, string>)) expect(value).toMatch(/<[a-z-]+>/);
    expect(keys).toEqual(
      expect.arrayContaining(['REDIS_URL', 'AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'HAT_DASHBOARD_TOKEN']),
    );
    const auth = ofKind('TriggerAuthentication')[0];
    for (const reference of auth.spec.secretTargetRef)
      expect([reference.name, keys.includes(reference.key)]).toEqual([secret.metadata.name, true]);
    for (const deployment of deployments) {
      expect(deployment.spec.template.spec.containers[0].envFrom).toEqual([
        { configMapRef: { name: 'hat-config' } },
        { secretRef: { name: 'hat-secrets' } },
      ]);
    }
    // Not a single secret value sits in the ConfigMap.
    expect(Object.keys(config).filter((key) => /SECRET|PASSWORD|TOKEN|KEY/.test(key))).toEqual([]);
  });

  it('names the lists BullMQ really uses: a waiting job is in <prefix>:<queue>:wait, a taken one in <prefix>:<queue>:active', async () => {
    const kit = await createQueueTestKit();
    const scaled = scaledObjects.find((object) => object.spec.scaleTargetRef.name === 'hat-worker-collect')!;
    // The manifest's own list names, moved under this test's prefix.
    const [waitList, activeList] = (scaled.spec.triggers as Manifest[]).map((trigger) =>
      (trigger.metadata.listName as string).replace(config.HAT_REDIS_PREFIX, kit.prefix),
    );
    const connection = createRedisConnection(kit.env, 'worker');
    const worker = new Worker('collect', null, { connection, prefix: kit.prefix, autorun: false });
    try {
      await kit.context.queue('collect').add('probe', {}, { jobId: 'probe' });
      expect([await kit.context.connection.type(waitList), await kit.context.connection.llen(waitList)]).toEqual([
        'list',
        1,
      ]);
      const job = await worker.getNextJob('probe-token');
      expect(job?.id).toBe('probe');
      expect([
        await kit.context.connection.llen(waitList),
        await kit.context.connection.type(activeList),
        await kit.context.connection.llen(activeList),
      ]).toEqual([0, 'list', 1]);
    } finally {
      await worker.close(true);
      await closeRedisConnection(connection);
      await kit.cleanup();
    }
  });
});

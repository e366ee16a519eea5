import { Rng } from '../../random/rng';
import { toCanonicalArguments } from '../tool-binding';
import type { Harness } from '../harness-types';
import { loadHarness, validateHarness } from '../load-harness';
import { normalizeHookMessages, hookBlock } from '../../text/hook-messages';
import { renderHarness, renderHookInjections, type RenderContext } from '../render';
import { sampleHarnessDirectory } from '../sample-harness';
import { paraphraseChinese } from './chinese-lexicon';
import { generateVariant } from './generate-variant';
import { randomArguments } from './testing/random-harness';
import { restyleBody } from './skill-content-family';
import { mentions } from './text-renamer';
import { mapArguments, sameJson } from './tool-layout';
import { checkChangedConstraints } from './variant-checks';
import type { HsaFamily, Variant } from './variant-mapping';

let sample: Harness;
const context: RenderContext = {
  campaignActive: true,
  activeCoupon: '满300减50',
  featuredItem: '冰丝阔腿裤',
  campaign: '春季上新',
  roomContext: '直播间ID：R1',
};

beforeAll(async () => {
  sample = await loadHarness(sampleHarnessDirectory());
});

function variants(families: HsaFamily[], count = 12): Variant[] {
  return Array.from({ length: count }, (_, index) =>
    generateVariant(sample, { families, rng: new Rng(`family-test/${families.join('+')}/${index}`) }),
  );
}

describe('skill_ids', () => {
  it('renames every skill id in several styles, and every reference follows', () => {
    const made = variants(['skill_ids'], 20);
    const styles = new Set<string>();
    for (const variant of made) {
      expect(validateHarness(variant.harness)).toEqual([]);
      const ids = variant.harness.skills.map((skill) => skill.id);
      for (const skill of sample.skills) {
        const entry = variant.mapping.skills[skill.id];
        expect(entry?.id).not.toBe(skill.id);
        expect(ids).toContain(entry?.id);
      }
      for (const hook of variant.harness.hooks) {
        const canonical = sample.hooks.find((candidate) => variant.mapping.hooks[candidate.id]?.id === hook.id);
        expect(hook.skills).toEqual(canonical?.skills?.map((id) => variant.mapping.skills[id]?.id));
      }
      const prompt = renderHarness(variant.harness, context).systemPrompt;
      for (const skill of sample.skills) expect(mentions(prompt, skill.id)).toBe(false);
      for (const id of ids)
        styles.add(
          /^SK-[0-9a-f]{4}$/.test(id) ? 'opaque' : id.includes('-') ? 'kebab' : /[A-Z]/.test(id) ? 'camel' : 'snake',
        );
    }
    expect(styles.size).toBeGreaterThanOrEqual(3);
  });

  it('renames skill names with Chinese synonyms and rewrites where text mentions them', () => {
    const harness = structuredClone(sample);
    const compliance = harness.skills.find((skill) => skill.id === 'compliance') as Harness['skills'][number];
    compliance.body = `${compliance.body}\n6. 涉及价格时配合"到手价计算"技能（price_calculation）。`;
    const renamed = Array.from({ length: 12 }, (_, index) =>
      generateVariant(harness, { families: ['skill_ids'], rng: new Rng(`names/${index}`) }),
    ).find((variant) => variant.mapping.skills.price_calculation?.name !== '到手价计算') as Variant;
    const entry = renamed.mapping.skills.price_calculation;
    const body = renamed.harness.skills.find((skill) => skill.id === renamed.mapping.skills.compliance?.id)?.body ?? '';
    expect(body).toContain(`配合"${entry.name}"技能（${entry.id}）`);
    expect(body).not.toContain('到手价计算');
  });
});

describe('skill_content', () => {
  it('reorders a list of independent items but keeps a sequence of steps in order', () => {
    const independent = '1. 不用绝对化用语\n2. 不承诺功效\n3. 不贬低竞品\n4. 礼貌拒绝私下交易';
    const steps = '1. 先判断主题\n2. 再查询政策\n3. 然后简短回答';
    const orders = new Set<string>();
    for (let seed = 0; seed < 20; seed++) {
      orders.add(restyleBody(independent, new Rng(seed), { reorder: true, restyle: false }));
      expect(restyleBody(steps, new Rng(seed), { reorder: true, restyle: false })).toBe(steps);
    }
    expect(orders.size).toBeGreaterThan(1);
    for (const order of orders)
      expect(
        order
          .split('\n')
          .map((line) => line.slice(3))
          .sort(),
      ).toEqual(
        independent
          .split('\n')
          .map((line) => line.slice(3))
          .sort(),
      );
  });

  it('restyles list markers and headings without touching the items', () => {
    const body = '## 步骤\n1. 查库存\n2. 报价\n- 备注一\n- 备注二';
    const restyled = new Set<string>();
    for (let seed = 0; seed < 20; seed++)
      restyled.add(restyleBody(body, new Rng(seed), { reorder: false, restyle: true }));
    expect(restyled.size).toBeGreaterThan(2);
    for (const text of restyled) {
      expect(text).toMatch(/查库存[\s\S]*报价/);
      expect(text).toContain('备注一');
    }
  });

  it('paraphrases only with the lexicon and never inside protected phrases or other words', () => {
    const text = '请告知观众到手价，禁用词见"必须遵守的约束"；观众申请连麦时不要回应，请问也不改。';
    for (let seed = 0; seed < 10; seed++) {
      const paraphrased = paraphraseChinese(text, new Rng(seed), 1, ['必须遵守的约束']);
      expect(paraphrased).toContain('"必须遵守的约束"');
      expect(paraphrased).toContain('申请连麦');
      expect(paraphrased).toContain('请问也不改');
      expect(paraphrased).not.toContain('请告知');
    }
  });

  it('adds distractor skills that use no tools and keep the harness valid', () => {
    const withDistractors = variants(['skill_content'], 12).filter((variant) => variant.mapping.addedSkills.length > 0);
    expect(withDistractors.length).toBeGreaterThan(0);
    for (const variant of withDistractors) {
      expect(validateHarness(variant.harness)).toEqual([]);
      for (const id of variant.mapping.addedSkills) {
        const skill = variant.harness.skills.find((candidate) => candidate.id === id);
        expect(skill?.tools).toEqual([]);
        expect(['直播间抽奖规则', '连麦互动', '粉丝团福利', '开播预告']).toContain(skill?.name);
      }
    }
  });
});

describe('tool_schemas', () => {
  it('variant bindings send every rewritten call to the same capability with the same canonical arguments', () => {
    for (const variant of variants(['tool_schemas'], 16)) {
      expect(validateHarness(variant.harness)).toEqual([]);
      for (const tool of sample.tools) {
        const entry = variant.mapping.tools[tool.name];
        const target = variant.harness.tools.find((candidate) => candidate.name === entry?.name);
        expect(target?.binding.capability).toBe(tool.binding.capability);
        for (let draw = 0; draw < 5; draw++) {
          const args = randomArguments(tool, new Rng(`${variant.hash}/${tool.name}/${draw}`));
          const mapped = mapArguments(args, { paths: entry?.parameters ?? {}, enumValues: entry?.enumValues ?? {} });
          if (!mapped.ok) throw new Error(mapped.reason);
          expect(
            sameJson(toCanonicalArguments(target!.binding, mapped.value), toCanonicalArguments(tool.binding, args)),
          ).toBe(true);
        }
      }
    }
  });

  it('renames tools everywhere they are mentioned, and respells enum values through the binding', () => {
    const made = variants(['tool_schemas'], 16);
    const respelled = made.find(
      (variant) => Object.keys(variant.mapping.tools.get_after_sales_policy?.enumValues ?? {}).length > 0,
    ) as Variant;
    expect(respelled).toBeDefined();
    const policy = respelled.harness.tools.find(
      (tool) => tool.name === respelled.mapping.tools.get_after_sales_policy?.name,
    );
    const topicPath = respelled.mapping.tools.get_after_sales_policy?.parameters.topic;
    const respellings = respelled.mapping.tools.get_after_sales_policy?.enumValues.topic;
    expect(Object.entries(policy?.binding.enumValues?.topic ?? {}).sort()).toEqual(
      Object.entries(respellings)
        .map(([canonical, variant]) => [variant, canonical])
        .sort(),
    );
    const mapped = mapArguments(
      { topic: 'returns' },
      { paths: { topic: topicPath }, enumValues: { topic: respellings } },
    );
    if (!mapped.ok) throw new Error(mapped.reason);
    expect(toCanonicalArguments(policy!.binding, mapped.value)).toEqual({ topic: 'returns' });
    for (const variant of made) {
      const prompt = renderHarness(variant.harness, context).systemPrompt;
      for (const tool of sample.tools) {
        const name = variant.mapping.tools[tool.name]?.name;
        if (name !== tool.name) expect(mentions(prompt, tool.name)).toBe(false);
      }
    }
  });

  it('adds distractor tools after the real tool of their capability, and distractor parameters the binding ignores', () => {
    const made = variants(['tool_schemas'], 24);
    const withTools = made.filter((variant) => variant.mapping.addedTools.length > 0);
    const withParameters = made.filter((variant) => Object.keys(variant.mapping.addedParameters).length > 0);
    expect(withTools.length).toBeGreaterThan(0);
    expect(withParameters.length).toBeGreaterThan(0);
    for (const variant of withTools) {
      const liveScript = variant.mapping.tools.get_live_script?.name;
      const names = variant.harness.tools.map((tool) => tool.name);
      for (const added of variant.mapping.addedTools) {
        const tool = variant.harness.tools.find((candidate) => candidate.name === added);
        expect(tool?.binding).toMatchObject({ capability: 'live_script', ignoredArguments: expect.any(Array) });
        expect(names.indexOf(added)).toBeGreaterThan(names.indexOf(liveScript));
      }
    }
    for (const variant of withParameters) {
      for (const [toolName, parameters] of Object.entries(variant.mapping.addedParameters)) {
        const tool = variant.harness.tools.find((candidate) => candidate.name === toolName);
        for (const parameter of parameters) expect(tool?.binding.ignoredArguments).toContain(parameter);
      }
    }
  });
});

describe('prompt_structure', () => {
  it('reorders sections, changes the format, and keeps references to a renamed title pointing at it', () => {
    const made = variants(['prompt_structure'], 16);
    expect(new Set(made.map((variant) => variant.harness.prompt.format)).size).toBeGreaterThan(2);
    expect(
      made.some(
        (variant) =>
          variant.harness.prompt.sections.map((section) => section.kind).join() !==
          sample.prompt.sections.map((section) => section.kind).join(),
      ),
    ).toBe(true);
    const retitled = made.filter(
      (variant) =>
        variant.harness.prompt.sections.find((section) => section.kind === 'constraints')?.title !== '必须遵守的约束',
    );
    expect(retitled.length).toBeGreaterThan(0);
    for (const variant of retitled) {
      const title = variant.harness.prompt.sections.find((section) => section.kind === 'constraints')?.title as string;
      const compliance = variant.harness.skills.find((skill) => skill.id === 'compliance')?.body ?? '';
      expect(compliance).toContain(`禁用词见"${title}"`);
      expect(renderHarness(variant.harness, context).systemPrompt).not.toContain('必须遵守的约束');
    }
  });
});

describe('hooks', () => {
  it('places some hooks as reminder blocks, the exact text normalizeHookMessages folds a system-message hook into', () => {
    const made = variants(['hooks'], 24);
    const moved = made.flatMap((variant) =>
      variant.harness.hooks.filter((hook) => hook.placement === 'reminder_block').map((hook) => ({ variant, hook })),
    );
    expect(moved.length).toBeGreaterThan(0);
    let exact = 0;
    for (const { variant, hook } of moved) {
      expect(validateHarness(variant.harness)).toEqual([]);
      const asBlock = renderHookInjections(variant.harness, hook.event, context);
      const asSystem = renderHookInjections(
        {
          ...variant.harness,
          hooks: variant.harness.hooks.map((other) =>
            other === hook ? { ...other, placement: 'system_message' as const } : other,
          ),
        },
        hook.event,
        context,
      );
      const text = asSystem.systemMessages.find((message) => !asBlock.systemMessages.includes(message));
      if (text === undefined) continue; // not in force in this room
      // The turn a served Qwen3.5 sees after folding equals the turn this variant writes.
      const turn =
        hook.event === 'after_tool_result'
          ? ({ role: 'tool', tool_call_id: 'call00001', content: 'result' } as const)
          : ({ role: 'user', content: 'question' } as const);
      const folded = normalizeHookMessages(
        [
          { role: 'system', content: 'prompt' },
          turn,
          { role: 'system', content: text },
          { role: 'assistant', content: 'answer' },
        ],
        'folded',
      );
      if (!folded.ok) throw new Error(folded.reason);
      expect(asBlock.userSuffix).toContain(`\n${hookBlock(text)}`);
      if (asBlock.userSuffix === `\n${hookBlock(text)}`) {
        expect(folded.messages[1].content).toBe(`${turn.content}${asBlock.userSuffix}`);
        exact++;
      }
    }
    expect(exact).toBeGreaterThan(0);
  });

  it('moves constraints to valid places and keeps every constraint in force', () => {
    const made = variants(['hooks'], 16);
    expect(
      made.some((variant) =>
        Object.values(variant.mapping.hooks).some(
          (entry) => entry.before.placement !== entry.after.placement || entry.before.event !== entry.after.event,
        ),
      ),
    ).toBe(true);
    for (const variant of made) {
      expect(validateHarness(variant.harness)).toEqual([]);
      const kinds = (harness: Harness) => harness.hooks.map((hook) => hook.constraint.type).sort();
      expect(kinds(variant.harness)).toEqual(kinds(sample));
    }
  });

  it('keeps a changed max_chars value only when the recorded replies still meet it', () => {
    const changed = variants(['hooks'], 40).find((variant) => {
      const entry = Object.values(variant.mapping.hooks).find((hook) => hook.constraint !== undefined);
      return entry?.constraint?.after.type === 'max_chars' && entry.constraint.after.value < 60;
    }) as Variant;
    expect(changed).toBeDefined();
    const limit = (
      Object.values(changed.mapping.hooks).find((hook) => hook.constraint)?.constraint?.after as { value: number }
    ).value;
    const trajectoryWith = (reply: string) =>
      ({ messages: [{ role: 'assistant' as const, content: reply }] }) as unknown as Parameters<
        typeof checkChangedConstraints
      >[0];
    expect(checkChangedConstraints(trajectoryWith('宝'.repeat(limit)), changed, context)).toBeUndefined();
    expect(checkChangedConstraints(trajectoryWith('宝'.repeat(limit + 1)), changed, context)?.detail).toMatch(
      new RegExp(`${limit + 1} characters, the variant allows ${limit}`),
    );
  });
});

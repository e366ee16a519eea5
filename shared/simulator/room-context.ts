import type { RenderContext } from '../harness/render';
import { couponLabel, type World } from './world/world';

/**
 * What the harness renders about the room: whether a campaign runs, its coupon and name, the
 * featured item's name (hooks fill these in), and a short text with the ids a host needs to
 * call tools (room, featured item id and link, campaign window). Prices, stock and policies are
 * left out on purpose: the model must get them from tools.
 */
export function renderContextOf(world: World): RenderContext {
  let context = contexts.get(world);
  if (context === undefined) {
    context = buildContext(world);
    contexts.set(world, context);
  }
  return context;
}

/** Worlds are immutable, so their context is computed once (the loop and the verifier both ask). */
const contexts = new WeakMap<World, RenderContext>();

function buildContext(world: World): RenderContext {
  const { snapshot, activeCampaign, activeCoupon } = world;
  const featured = snapshot.featuredItemId !== undefined ? world.itemsById.get(snapshot.featuredItemId) : undefined;
  // The host's name and voice come from the harness persona, not the room.
  const lines = [`直播间ID：${snapshot.roomId}`];
  if (featured !== undefined) {
    const link = world.linkByItemId.get(featured.itemId);
    lines.push(
      `正在讲解：${featured.shortName}（item_id: ${featured.itemId}${link !== undefined ? `，${link}号链接` : ''}）`,
    );
  } else {
    lines.push('正在讲解：暂无');
  }
  if (activeCampaign !== undefined) {
    lines.push(
      `进行中的活动：${activeCampaign.name}（${beijingTime(activeCampaign.startsAt)} 至 ${beijingTime(activeCampaign.endsAt)}）`,
    );
    if (activeCoupon !== undefined) lines.push(`直播间专享券：${activeCoupon.name}（${couponLabel(activeCoupon)}）`);
  } else {
    lines.push('进行中的活动：无');
  }
  lines.push(`购物袋共${snapshot.links.length}个链接，链接对应的商品可查直播脚本`);
  const context: RenderContext = { campaignActive: activeCampaign !== undefined, roomContext: lines.join('\n') };
  if (activeCoupon !== undefined) context.activeCoupon = activeCoupon.name;
  if (featured !== undefined) context.featuredItem = featured.shortName;
  if (activeCampaign !== undefined) context.campaign = activeCampaign.name;
  return context;
}

/** `2025-03-14 19:00` in Beijing time (UTC+8), how a live room states times. */
export function beijingTime(iso: string): string {
  const shifted = new Date(Date.parse(iso) + 8 * 3_600_000).toISOString();
  return `${shifted.slice(0, 10)} ${shifted.slice(11, 16)}`;
}

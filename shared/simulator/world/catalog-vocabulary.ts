import type { Category } from './room-snapshot';

/**
 * The word lists the catalog generator draws from: product nouns per category with their price
 * bands, SKU axes, spec sheets and selling points, brand syllables, colors, shipping and
 * after-sales profiles. Brands are invented (two-syllable brand-like names) so a generated item
 * never claims to be a real company's product.
 */

/** Which shipping and after-sales templates an item gets. */
export type PolicyProfile =
  'apparel' | 'beauty' | 'fresh' | 'packaged_food' | 'digital' | 'appliance' | 'textile' | 'houseware';

export interface SpecOption {
  /** SKU spec label (`256GB`, `50ml`). */
  label: string;
  /** Price added to the base price for this option, yuan. */
  priceDelta: number;
}

export interface SubcategoryTemplate {
  name: string;
  category: Category;
  /** Base current price band, yuan. */
  priceRange: [number, number];
  /** Title words before the noun (加厚连帽, 主动降噪). */
  modifiers: string[];
  /** Title words after the noun (女中长款, 2024新款). */
  suffixes: string[];
  /** Apparel items have sizes and a size chart. */
  sized?: boolean;
  /** Number of colors per item [min, max] (0 = no color axis). */
  colors?: [number, number];
  colorPool?: readonly string[];
  specOptions?: SpecOption[][];
  /** Spec sheet: key -> candidate values. */
  specs: Record<string, string[]>;
  sellingPoints: string[];
  profile: PolicyProfile;
}

export const apparelColors = [
  '黑色',
  '白色',
  '燕麦色',
  '雾霾蓝',
  '藏青色',
  '酒红色',
  '卡其色',
  '浅灰色',
  '奶白色',
  '墨绿色',
  '焦糖色',
  '米杏色',
] as const;
export const gadgetColors = ['曜石黑', '珍珠白', '星空蓝', '樱花粉', '远峰蓝', '钛金灰', '薄荷绿'] as const;
export const homeColors = ['奶油白', '雾霾蓝', '高级灰', '豆沙粉', '橄榄绿', '燕麦色'] as const;
export const lipstickShades = ['#999正红', '#316豆沙', '#888枫叶红', '#520奶茶', '#707烂番茄', '#200珊瑚橘'] as const;

export const apparelSizes = ['S', 'M', 'L', 'XL', 'XXL'] as const;

export const subcategoryTemplates: SubcategoryTemplate[] = [
  // apparel
  {
    name: '羽绒服',
    category: 'apparel',
    priceRange: [299, 1299],
    sized: true,
    colors: [2, 4],
    colorPool: apparelColors,
    modifiers: ['加厚连帽', '轻薄短款', '白鸭绒', '面包款', '鹅绒', '三防'],
    suffixes: ['女中长款', '男款', '情侣款', '冬季新款'],
    specs: {
      面料: ['100%聚酯纤维', '锦纶86% 氨纶14%'],
      填充物: ['白鸭绒90%', '白鹅绒95%', '灰鸭绒90%'],
      充绒量: ['150g', '180g', '220g', '260g'],
      版型: ['宽松', '常规', '收腰'],
      厚度: ['加厚', '常规'],
    },
    sellingPoints: ['90%高含绒量，轻盈保暖', '三防面料，防泼水防油污', '立体连帽，挡风锁温', '零下20度也不怕冷'],
    profile: 'apparel',
  },
  {
    name: '卫衣',
    category: 'apparel',
    priceRange: [89, 399],
    sized: true,
    colors: [2, 4],
    colorPool: apparelColors,
    modifiers: ['重磅纯棉', '加绒', '连帽', '圆领', '美式复古'],
    suffixes: ['男女同款', '女宽松', '秋冬新款'],
    specs: {
      面料: ['95%棉 5%氨纶', '100%棉', '棉80% 聚酯纤维20%'],
      克重: ['380g', '420g', '500g'],
      版型: ['宽松', '落肩', '常规'],
      适用季节: ['春秋', '秋冬'],
    },
    sellingPoints: ['重磅面料，挺括不变形', '内里加绒，保暖不起球', '落肩版型，显瘦遮肉', '精梳棉，亲肤透气'],
    profile: 'apparel',
  },
  {
    name: 'T恤',
    category: 'apparel',
    priceRange: [39, 199],
    sized: true,
    colors: [2, 5],
    colorPool: apparelColors,
    modifiers: ['纯棉', '冰丝', '短袖', '新疆长绒棉', '速干'],
    suffixes: ['男款', '女款', '夏季新款', '基础款'],
    specs: {
      面料: ['100%棉', '新疆长绒棉', '莫代尔50% 棉50%'],
      克重: ['180g', '220g', '260g'],
      版型: ['宽松', '修身', '常规'],
      领型: ['圆领', 'V领'],
    },
    sellingPoints: ['新疆长绒棉，柔软透气', '不透不变形，洗后不缩水', '基础百搭，一衣多穿'],
    profile: 'apparel',
  },
  {
    name: '连衣裙',
    category: 'apparel',
    priceRange: [129, 599],
    sized: true,
    colors: [2, 3],
    colorPool: apparelColors,
    modifiers: ['法式碎花', '收腰', '针织', '小香风', '缎面'],
    suffixes: ['女夏季', '中长款', '气质款'],
    specs: {
      面料: ['100%聚酯纤维', '醋酸缎面', '棉麻混纺'],
      裙长: ['中长款', '长款', '短款'],
      版型: ['收腰', 'A字', '直筒'],
      适用季节: ['夏季', '春秋'],
    },
    sellingPoints: ['收腰设计，显高显瘦', '垂坠面料，不易起皱', '通勤约会都能穿'],
    profile: 'apparel',
  },
  {
    name: '牛仔裤',
    category: 'apparel',
    priceRange: [99, 399],
    sized: true,
    colors: [1, 3],
    colorPool: ['浅蓝色', '深蓝色', '黑色', '烟灰色'],
    modifiers: ['高腰直筒', '阔腿', '弹力小脚', '微喇', '加绒'],
    suffixes: ['女', '男', '显瘦款'],
    specs: {
      面料: ['棉98% 氨纶2%', '100%棉'],
      裤长: ['九分', '长裤'],
      版型: ['直筒', '阔腿', '修身'],
      弹力: ['微弹', '高弹', '无弹'],
    },
    sellingPoints: ['高腰设计，拉长腿部比例', '弹力面料，久坐不勒', '不掉色不起球'],
    profile: 'apparel',
  },
  {
    name: '冲锋衣',
    category: 'apparel',
    priceRange: [299, 999],
    sized: true,
    colors: [2, 4],
    colorPool: apparelColors,
    modifiers: ['三合一', '防水透气', '户外', '硬壳'],
    suffixes: ['男女同款', '登山款', '秋冬'],
    specs: {
      面料: ['锦纶100%', '聚酯纤维100%'],
      防水指数: ['5000mm', '10000mm', '20000mm'],
      内胆: ['抓绒内胆', '羽绒内胆', '无'],
      版型: ['常规', '宽松'],
    },
    sellingPoints: ['高防水指数，小雨不怕', '可拆卸内胆，一衣三穿', '透气不闷汗'],
    profile: 'apparel',
  },
  // beauty
  {
    name: '精华液',
    category: 'beauty',
    priceRange: [129, 899],
    modifiers: ['玻尿酸', '烟酰胺', '二裂酵母', '维C', '视黄醇'],
    suffixes: ['补水保湿', '提亮肤色', '修护款'],
    specOptions: [
      [
        { label: '30ml', priceDelta: 0 },
        { label: '50ml', priceDelta: 120 },
        { label: '100ml', priceDelta: 260 },
      ],
    ],
    specs: {
      净含量: ['30ml', '50ml'],
      适用肤质: ['所有肤质', '干性肌肤', '油性肌肤', '混合性肌肤'],
      保质期: ['3年', '2年'],
      功效: ['补水保湿', '提亮肤色', '修护屏障', '淡纹紧致'],
      产地: ['中国', '法国', '日本'],
    },
    sellingPoints: ['高浓度精华，吸收快不黏腻', '敏感肌也能用', '28天肉眼可见透亮'],
    profile: 'beauty',
  },
  {
    name: '面霜',
    category: 'beauty',
    priceRange: [99, 699],
    modifiers: ['神经酰胺', '积雪草', '胶原蛋白', '玻色因'],
    suffixes: ['保湿修护', '抗皱紧致', '滋润款'],
    specOptions: [
      [
        { label: '50g', priceDelta: 0 },
        { label: '80g', priceDelta: 90 },
      ],
    ],
    specs: {
      净含量: ['50g', '80g'],
      适用肤质: ['所有肤质', '干性肌肤', '敏感肌肤'],
      保质期: ['3年', '2年'],
      质地: ['乳霜', '啫喱', '膏状'],
      产地: ['中国', '法国', '韩国'],
    },
    sellingPoints: ['质地轻薄，一抹就化开', '修护屏障，换季不泛红', '熬夜肌救星'],
    profile: 'beauty',
  },
  {
    name: '口红',
    category: 'beauty',
    priceRange: [59, 399],
    colors: [3, 5],
    colorPool: lipstickShades,
    modifiers: ['丝绒哑光', '滋润', '镜面', '小金条'],
    suffixes: ['不易沾杯', '显白', '礼盒装'],
    specs: { 净含量: ['3.5g', '3g'], 质地: ['哑光', '丝绒', '滋润'], 保质期: ['3年'], 产地: ['中国', '法国'] },
    sellingPoints: ['显白不挑皮', '不拔干，不易沾杯', '一支通勤一支约会'],
    profile: 'beauty',
  },
  {
    name: '防晒霜',
    category: 'beauty',
    priceRange: [69, 299],
    modifiers: ['清爽', '物理', '水感', '户外'],
    suffixes: ['SPF50+', '面部身体可用', '学生党'],
    specOptions: [
      [
        { label: '50ml', priceDelta: 0 },
        { label: '50ml×2支', priceDelta: 80 },
      ],
    ],
    specs: {
      净含量: ['50ml', '60ml'],
      防晒指数: ['SPF50+ PA++++', 'SPF30 PA+++'],
      适用肤质: ['所有肤质', '油性肌肤'],
      保质期: ['3年'],
      防水: ['防水防汗', '不防水'],
    },
    sellingPoints: ['高倍防晒，清爽不油腻', '不搓泥可叠妆', '防水防汗，户外也不怕'],
    profile: 'beauty',
  },
  {
    name: '洗面奶',
    category: 'beauty',
    priceRange: [39, 189],
    modifiers: ['氨基酸', '温和', '控油', '泡沫'],
    suffixes: ['洁面乳', '男女通用', '敏感肌'],
    specOptions: [
      [
        { label: '120g', priceDelta: 0 },
        { label: '120g×2支', priceDelta: 50 },
      ],
    ],
    specs: {
      净含量: ['100g', '120g', '150g'],
      适用肤质: ['所有肤质', '油性肌肤', '敏感肌肤'],
      保质期: ['3年'],
      主要成分: ['氨基酸表活', '皂基'],
    },
    sellingPoints: ['氨基酸配方，洗完不紧绷', '绵密泡沫，深层清洁', '温和不刺激'],
    profile: 'beauty',
  },
  // food
  {
    name: '每日坚果',
    category: 'food',
    priceRange: [49, 199],
    modifiers: ['混合', '原味', '孕妇', '果仁'],
    suffixes: ['30包礼盒', '独立小包装', '年货'],
    specOptions: [
      [
        { label: '750g(30袋)', priceDelta: 0 },
        { label: '1.5kg(60袋)', priceDelta: 70 },
      ],
    ],
    specs: {
      净含量: ['750g', '525g'],
      保质期: ['180天', '240天'],
      储存方式: ['常温阴凉干燥处'],
      配料: ['核桃仁、腰果、巴旦木、榛子、蔓越莓干'],
      产地: ['中国'],
    },
    sellingPoints: ['每天一包，营养均衡', '独立小包装，锁住新鲜', '不添加蔗糖'],
    profile: 'packaged_food',
  },
  {
    name: '牛肉干',
    category: 'food',
    priceRange: [39, 168],
    modifiers: ['内蒙古风干', '手撕', '麻辣', '五香'],
    suffixes: ['零食', '独立包装', '量贩装'],
    specOptions: [
      [
        { label: '250g', priceDelta: 0 },
        { label: '500g', priceDelta: 45 },
      ],
    ],
    specs: {
      净含量: ['250g', '500g'],
      保质期: ['9个月', '12个月'],
      储存方式: ['常温阴凉干燥处'],
      口味: ['原味', '麻辣', '五香'],
      产地: ['内蒙古锡林郭勒'],
    },
    sellingPoints: ['真牛肉，有嚼劲', '风干工艺，越嚼越香', '高蛋白解馋零食'],
    profile: 'packaged_food',
  },
  {
    name: '螺蛳粉',
    category: 'food',
    priceRange: [29, 99],
    modifiers: ['正宗柳州', '加臭加辣', '原味'],
    suffixes: ['速食', '5包装', '整箱'],
    specOptions: [
      [
        { label: '5包', priceDelta: 0 },
        { label: '10包', priceDelta: 35 },
      ],
    ],
    specs: {
      净含量: ['330g×5包', '400g×5包'],
      保质期: ['180天'],
      储存方式: ['常温'],
      辣度: ['中辣', '特辣'],
      产地: ['广西柳州'],
    },
    sellingPoints: ['柳州本地工厂直发', '料包足，酸笋够味', '三分钟煮好'],
    profile: 'packaged_food',
  },
  {
    name: '挂耳咖啡',
    category: 'food',
    priceRange: [39, 129],
    modifiers: ['现磨', '精品', '云南', '美式'],
    suffixes: ['黑咖啡', '无糖', '礼盒'],
    specOptions: [
      [
        { label: '10g×20包', priceDelta: 0 },
        { label: '10g×50包', priceDelta: 60 },
      ],
    ],
    specs: {
      净含量: ['10g×20包'],
      保质期: ['12个月'],
      烘焙程度: ['中深烘', '中烘', '浅烘'],
      产地: ['云南保山', '埃塞俄比亚'],
      配料: ['100%阿拉比卡咖啡豆'],
    },
    sellingPoints: ['现磨现封，香气足', '无糖无植脂末', '办公室一冲即饮'],
    profile: 'packaged_food',
  },
  {
    name: '车厘子',
    category: 'food',
    priceRange: [99, 399],
    modifiers: ['智利进口', 'JJ级', 'JJJ级', '新鲜'],
    suffixes: ['顺丰冷链', '礼盒装', '当季'],
    specOptions: [
      [
        { label: '2斤装', priceDelta: 0 },
        { label: '5斤装', priceDelta: 180 },
      ],
    ],
    specs: {
      果径: ['28-30mm', '30-32mm', '26-28mm'],
      储存方式: ['冷藏'],
      保质期: ['冷藏7天'],
      产地: ['智利'],
      净含量: ['2斤'],
    },
    sellingPoints: ['果径大，脆甜多汁', '冷链直发，坏果包赔', '现摘现发'],
    profile: 'fresh',
  },
  {
    name: '大闸蟹',
    category: 'food',
    priceRange: [199, 899],
    modifiers: ['阳澄湖', '鲜活', '公母对', '大规格'],
    suffixes: ['礼盒', '现货', '顺丰包邮'],
    specOptions: [
      [
        { label: '4对(公4.0两母3.0两)', priceDelta: 0 },
        { label: '5对(公4.5两母3.5两)', priceDelta: 200 },
      ],
    ],
    specs: {
      规格: ['公4.0两 母3.0两', '公4.5两 母3.5两'],
      储存方式: ['冷藏鲜活'],
      保质期: ['收货后尽快食用'],
      产地: ['江苏苏州'],
    },
    sellingPoints: ['鲜活直发，死蟹包赔', '膏满黄肥', '送礼有面子'],
    profile: 'fresh',
  },
  // electronics
  {
    name: '蓝牙耳机',
    category: 'electronics',
    priceRange: [99, 899],
    colors: [2, 3],
    colorPool: gadgetColors,
    modifiers: ['主动降噪', '半入耳', '运动', '骨传导'],
    suffixes: ['无线', 'Pro', '2024新款'],
    specs: {
      续航: ['6小时(配合充电盒30小时)', '8小时(配合充电盒36小时)', '5小时(配合充电盒24小时)'],
      蓝牙版本: ['5.3', '5.4'],
      防水等级: ['IPX4', 'IPX5', 'IP55'],
      降噪深度: ['-45dB', '-40dB', '不支持降噪'],
      重量: ['4.5g(单耳)', '5.2g(单耳)'],
    },
    sellingPoints: ['通勤降噪，世界瞬间安静', '低延迟游戏模式', '佩戴稳固不掉'],
    profile: 'digital',
  },
  {
    name: '充电宝',
    category: 'electronics',
    priceRange: [69, 299],
    colors: [1, 3],
    colorPool: gadgetColors,
    modifiers: ['超薄', '自带线', '磁吸', '22.5W快充'],
    suffixes: ['大容量', '可上飞机', '便携'],
    specOptions: [
      [
        { label: '10000mAh', priceDelta: 0 },
        { label: '20000mAh', priceDelta: 60 },
      ],
    ],
    specs: {
      容量: ['10000mAh', '20000mAh'],
      最大输出功率: ['22.5W', '30W', '65W'],
      重量: ['198g', '245g', '380g'],
      接口: ['USB-C×2 USB-A×1', 'USB-C×1 USB-A×1'],
      电芯: ['锂聚合物'],
    },
    sellingPoints: ['能带上飞机', '一次充满手机两次', '自带线出门不用带线'],
    profile: 'digital',
  },
  {
    name: '智能手表',
    category: 'electronics',
    priceRange: [299, 1999],
    colors: [2, 3],
    colorPool: gadgetColors,
    modifiers: ['运动', '血氧心率', 'eSIM', 'GPS'],
    suffixes: ['男女', '长续航', 'Pro'],
    specOptions: [
      [
        { label: '蓝牙版', priceDelta: 0 },
        { label: 'eSIM版', priceDelta: 300 },
      ],
    ],
    specs: {
      屏幕: ['1.43英寸AMOLED', '1.32英寸AMOLED', '1.96英寸AMOLED'],
      续航: ['14天', '10天', '7天'],
      防水等级: ['5ATM', 'IP68'],
      重量: ['32g', '40g'],
      定位: ['双频GPS', 'GPS', '无'],
    },
    sellingPoints: ['两周一充，续航超长', '血氧心率睡眠全天监测', '100多种运动模式'],
    profile: 'digital',
  },
  {
    name: '扫地机器人',
    category: 'electronics',
    priceRange: [999, 3999],
    colors: [1, 2],
    colorPool: ['珍珠白', '曜石黑'],
    modifiers: ['扫拖一体', '自动集尘', '激光导航', '免洗拖布'],
    suffixes: ['全自动', '家用', '基站款'],
    specs: {
      吸力: ['6000Pa', '8000Pa', '12000Pa'],
      续航: ['180分钟', '150分钟', '200分钟'],
      尘盒容量: ['400ml', '450ml'],
      导航方式: ['激光导航', '视觉导航'],
      噪音: ['≤62dB', '≤65dB'],
    },
    sellingPoints: ['自动集尘，两个月不用倒垃圾', '越障2cm，门槛轻松过', '拖布自动清洗烘干'],
    profile: 'appliance',
  },
  {
    name: '电动牙刷',
    category: 'electronics',
    priceRange: [99, 599],
    colors: [2, 3],
    colorPool: gadgetColors,
    modifiers: ['声波', '软毛', '情侣', '美白'],
    suffixes: ['成人款', '礼盒', '长续航'],
    specs: {
      续航: ['60天', '90天', '30天'],
      刷头数量: ['2支', '3支', '4支'],
      防水等级: ['IPX7', 'IPX8'],
      振动频率: ['42000次/分钟', '38000次/分钟'],
      充电方式: ['Type-C', '磁吸充电'],
    },
    sellingPoints: ['声波震动，清洁力强', '充一次用两个月', '五种模式护齿'],
    profile: 'appliance',
  },
  // home
  {
    name: '四件套',
    category: 'home',
    priceRange: [159, 799],
    colors: [2, 4],
    colorPool: homeColors,
    modifiers: ['全棉', '60支长绒棉', '水洗真丝', '磨毛'],
    suffixes: ['床上用品', '亲肤', '简约'],
    specOptions: [
      [
        { label: '1.5m床(被套200×230cm)', priceDelta: 0 },
        { label: '1.8m床(被套220×240cm)', priceDelta: 40 },
      ],
    ],
    specs: {
      材质: ['100%棉', '60支长绒棉', '天丝'],
      工艺: ['缎纹', '磨毛', '平纹'],
      件数: ['4件(被套1 床单1 枕套2)'],
      适用季节: ['四季通用', '秋冬'],
    },
    sellingPoints: ['A类母婴级，亲肤可裸睡', '越洗越柔软', '不起球不褪色'],
    profile: 'textile',
  },
  {
    name: '保温杯',
    category: 'home',
    priceRange: [59, 299],
    colors: [2, 4],
    colorPool: homeColors,
    modifiers: ['316不锈钢', '大容量', '便携', '茶水分离'],
    suffixes: ['男女', '学生', '车载'],
    specOptions: [
      [
        { label: '500ml', priceDelta: 0 },
        { label: '750ml', priceDelta: 30 },
      ],
    ],
    specs: {
      容量: ['500ml', '750ml'],
      材质: ['316不锈钢内胆', '304不锈钢内胆'],
      保温时长: ['12小时', '24小时'],
      重量: ['320g', '410g'],
    },
    sellingPoints: ['316医用级不锈钢', '24小时长效保温', '一键开盖不漏水'],
    profile: 'houseware',
  },
  {
    name: '空气炸锅',
    category: 'home',
    priceRange: [199, 799],
    colors: [1, 2],
    colorPool: homeColors,
    modifiers: ['可视', '大容量', '不用翻面', '双篮'],
    suffixes: ['家用', '多功能', '新款'],
    specOptions: [
      [
        { label: '4.5L', priceDelta: 0 },
        { label: '6L', priceDelta: 80 },
      ],
    ],
    specs: {
      容量: ['4.5L', '6L', '5.5L'],
      功率: ['1350W', '1500W', '1700W'],
      控制方式: ['触控屏', '旋钮'],
      内胆材质: ['不粘涂层', '玻璃内胆'],
    },
    sellingPoints: ['可视窗口，随时看火候', '少油更健康', '不用翻面，360度热风'],
    profile: 'appliance',
  },
  {
    name: '乳胶枕',
    category: 'home',
    priceRange: [99, 399],
    colors: [0, 0],
    modifiers: ['泰国天然', '护颈', '高低', '儿童'],
    suffixes: ['单人', '一对装', '枕芯'],
    specOptions: [
      [
        { label: '单只装', priceDelta: 0 },
        { label: '一对装', priceDelta: 90 },
      ],
    ],
    specs: {
      材质: ['天然乳胶(含量93%)', '天然乳胶(含量85%)'],
      尺寸: ['60×40cm', '70×40cm'],
      高度: ['10/12cm高低', '9/11cm高低'],
      产地: ['泰国'],
    },
    sellingPoints: ['护颈曲线，睡得更稳', '天然乳胶，回弹好', '透气孔设计不闷热'],
    profile: 'textile',
  },
  {
    name: '收纳箱',
    category: 'home',
    priceRange: [39, 159],
    colors: [1, 3],
    colorPool: homeColors,
    modifiers: ['可折叠', '透明', '带轮', '加厚'],
    suffixes: ['衣物收纳', '大号', '三只装'],
    specOptions: [
      [
        { label: '45L', priceDelta: 0 },
        { label: '66L', priceDelta: 20 },
      ],
    ],
    specs: {
      容量: ['45L', '66L', '100L'],
      材质: ['PP', 'PET'],
      承重: ['30kg', '50kg'],
      尺寸: ['53×37×31cm', '60×42×33cm'],
    },
    sellingPoints: ['加厚材质，能坐人', '可叠放省空间', '透明一眼找到'],
    profile: 'houseware',
  },
];

/** First and second syllables of invented brand names (云岚, 森屿 ...). */
export const brandFirstSyllables = [
  '云',
  '森',
  '悦',
  '雪',
  '花',
  '星',
  '素',
  '暖',
  '初',
  '拾',
  '南',
  '北',
  '青',
  '禾',
  '木',
  '川',
  '朗',
  '沐',
  '晴',
  '简',
  '然',
  '元',
  '栖',
  '屿',
] as const;
export const brandSecondSyllables = [
  '岚',
  '熙',
  '澜',
  '选',
  '品',
  '家',
  '光',
  '语',
  '境',
  '纪',
  '集',
  '匠',
  '派',
  '途',
  '格',
  '源',
  '度',
  '颜',
  '棠',
  '序',
  '野',
  '舍',
] as const;
export const shopSuffixes = ['官方旗舰店', '旗舰店', '专营店', '官方店'] as const;

export const hostNames = ['小美', '阿琳', '糖糖', '小鹿', '可可', '晓晓', '大橙子', '安安'] as const;
export const hostStyles = ['亲切活泼', '专业干练', '温柔耐心', '热情幽默'] as const;

export const campaignNames = [
  '双11预售狂欢',
  '618年中大促',
  '年货节',
  '宠粉福利夜',
  '周年庆',
  '开学季',
  '38女王节',
  '秋冬上新',
] as const;
export const campaignGifts = [
  '前100名下单送定制帆布袋',
  '前50名加赠同款旅行装',
  '下单抽10位免单',
  '付款前200名送保温杯',
] as const;
export const campaignTalkingPoints = [
  '今天是全年力度最大的一场',
  '直播间专享券，下播就失效',
  '库存有限，先拍先得',
  '拍下后48小时内发货',
  '点关注不迷路，福利天天有',
] as const;

export const carriers = ['中通快递', '圆通速递', '顺丰速运', '韵达快递', '京东物流'] as const;
export const remoteRegionPool = ['新疆', '西藏', '青海', '内蒙古', '甘肃', '宁夏', '海南'] as const;
export const ordinaryRegions = [
  '北京',
  '上海',
  '广东',
  '浙江',
  '江苏',
  '四川',
  '湖北',
  '山东',
  '河南',
  '福建',
] as const;

/** Famous products the generated rooms never carry (out-of-catalog questions). */
export const outOfCatalogProducts: Array<{ query: string; noun: string }> = [
  { query: '戴森吹风机', noun: '吹风机' },
  { query: '苹果手机', noun: '手机' },
  { query: '茅台', noun: '白酒' },
  { query: '香奈儿香水', noun: '香水' },
  { query: '始祖鸟冲锋衣', noun: '冲锋衣' },
  { query: '任天堂游戏机', noun: '游戏机' },
  { query: '乐高积木', noun: '积木' },
  { query: '猫粮', noun: '猫粮' },
  { query: '婴儿纸尿裤', noun: '纸尿裤' },
  { query: '电动自行车', noun: '电动自行车' },
  { query: '按摩椅', noun: '按摩椅' },
  { query: '钻戒', noun: '钻戒' },
];

/** Attributes viewers ask about that spec sheets do not record (out-of-catalog facts). */
export const unrecordedAttributes: Record<string, string[]> = {
  apparel: ['会不会起球', '是不是国标A类', '会不会掉毛'],
  beauty: ['孕妇能不能用', '是不是纯植物的', '会不会闷痘'],
  food: ['糖尿病人能吃吗', '有没有添加防腐剂'],
  electronics: ['能不能连电脑', '支不支持无线充电'],
  home: ['有没有甲醛', '能不能机洗'],
};

/**
 * The English vocabulary of generated models, and the SentencePiece-style ("llama") tokenizer
 * vocabulary built from it.
 *
 * Words: about 2,700 from @nkzw/safe-word-list (MIT, Copyright (c) 2022 Christoph Nakazawa) plus
 * function words, irregular forms and a few everyday nouns added by hand, ordered most frequent
 * first (by rank in the google-10000-english list). Kept in code, not as a dependency, because the
 * daemon writes its demo model at run time and must not need the network or a data package.
 * The list's license is reproduced at the end of this file.
 */

const WORD_LINES = [
  "the of and to a in for is on that by this with i you it not or be are from at as your all have",
  "new more an was we will home can us about if page my has search free but our one other do no",
  "information time they site he up may what which their news out use any there see only so his",
  "when contact here business who also now help get view online first am been would how were me",
  "some these its like service than find price date back top people had list name just over state",
  "year day into two health world next used go work last most music buy data make them should",
  "product system post her city add policy number such please available support message after best",
  "hello software yes ok then good thanks sorry video cat well dog sat where mat fox public books",
  "high school through each she review years order very privacy book company read group need many",
  "user said does set under general research university january mail full map program life know way",
  "days management part could great hotel real item international center must store travel made",
  "development report off member line terms before did send right type because local those office",
  "education national car design take address community within area want phone subject between",
  "family long code show even black check special index being women much sign file link open today",
  "technology south case project same version section own found house security both county photo",
  "game power while care network down computer three total place end following him without per",
  "access think north current big media law control water history size art personal since including",
  "guide shop board location change white text small rating rate government children during return",
  "shopping account times level digital profile previous form love old main call hours image",
  "department title description insurance another why shall property class still money quality",
  "every content country private little visit save low reply customer december compare include",
  "college value article man card provide food source author different press learn sale around",
  "print course job process teen room stock training too credit point join science men advanced",
  "west sales look left team estate box select week category note live large gallery table register",
  "however june october november market library really action start series model air industry plan",
  "human second hot cost movie march september better say questions july going medical test friend",
  "come server study application staff again play april never users complete street topic comment",
  "financial things working against standard tax person below less got party payment equipment",
  "student let legal above recent park side act red give memory performance social august quote",
  "language story sell experience create key body young important field few east paper single age",
  "club example girls additional something road gift question night hard pay four status issue",
  "range building court february always result light write offer blue easy given files event",
  "release analysis request picture possible might professional yet month major star future space",
  "committee hand sun meeting become interest child keep enter share similar garden million",
  "reference baby learning energy run delivery net popular term film put journal try welcome",
  "central president notice original head radio until cell color self council away track discussion",
  "once others entertainment agreement least society months safety friends sure trade edition cars",
  "marketing tell association able having fun already green close common drive specific several",
  "gold living collection short lot ask display limited director daily beach past natural whether",
  "due five upon period planning says official weather land average done technical window region",
  "island record direct conference environment district style front statement parts ever early",
  "sound resource present either ago document word works material bill written talk federal final",
  "adult thing via cheap finance true minutes else mark third rock reading bad individual plus auto",
  "cover usually together fast function fact unit global meet far economic player often submit",
  "amount watch feel though bank everything various words production commercial weight town heart",
  "advertising choose treatment knowledge magazine camera girl currently construction toys clear",
  "golf receive chapter makes protection loan wide beauty manager position taken sort models known",
  "half step engineering simple quick none license friday lake whole annual later basic corporate",
  "church method purchase active response practice figure holiday enough along among writing speed",
  "face brand remember oil bit yellow political increase base near environmental thought stuff",
  "storage oh doing entry stay nature turn mean growth agency king monday activity copy although",
  "western income force cash employment overall river commission package seen engine port album",
  "regional stop administration bar double build screen exchange soon electronic continue across",
  "season apply someone held anything condition effective believe organization effect mind sunday",
  "selection lost tour menu volume cross anyone mortgage hope silver corporation wish inside",
  "solution role rather weeks addition came supply nothing certain executive running lower",
  "necessary union according clothing particular fine names hour gas six advice career military",
  "decision leave huge woman kind middle move cable division tuesday object appropriate machine",
  "length actually nice score statistics client capital follow sample investment sent saturday",
  "culture band ms lead choice went thursday consumer hi airport foreign artist outside furniture",
  "channel letter mode wednesday structure fund summer allow degree contract button super male",
  "matter custom almost took multiple distribution editor industrial cause potential song focus",
  "late fall idea female responsible win primary reason tool spring foundation answer voice",
  "friendly schedule communication purpose feature bed comes police everyone independent approach",
  "brown physical operating hill medicine deal hold glass happy thank safe unique survey prior",
  "telephone sport ready feed animal population regular secure therefore simply evidence station",
  "round favorite understand option master valley recently probably sea built cut improve",
  "connection publisher hall earth impact transfer introduction kitchen strong wedding hospital",
  "ground ship excellent paid perfect hair opportunity classic basis command express award distance",
  "tree assessment ensure wall involved extra especially budget success operation existing quite",
  "boy beautiful warning wine horse vote forward significant owner useful directly manufacturer",
  "ways son rule housing takes bring mother authority told traffic input strategy agent modern",
  "senior teaching door grand testing trial charge instead cool normal wrote enterprise entire",
  "educational leading metal positive fitness opinion football output mr likely develop alternative",
  "responsibility resolution guest publication pass trust session vacation century academic",
  "assistance skin ring grade mountain pop vehicle consider northern behind panel floor match",
  "proposed require boys deep morning otherwise rest protein plant hit transportation pool politics",
  "partner faculty fish membership mission eye string sense pack stage internal born unless",
  "detailed race background target except character maintenance ability maybe places pretty",
  "southern yourself etc winter battery youth medium television interested core break throughout",
  "dance wood itself fee studio reader device remote dark external apple regarding theory enjoy",
  "remove aid surface visual host variety block increased fair civil steel understanding beginning",
  "hands finally gets sector capacity fully father electric saw officer driver respect unknown",
  "restaurant trip worth teacher eyes relationship farm peace traditional campus creative coast",
  "benefit progress funding grant agree fiction hear sometimes beyond goes led museum themselves",
  "fan interesting wife evaluation former ten zone complex flat flow literature parent setting dr",
  "scale stand economy helpful frame musical definition secretary path employee chief gives bottom",
  "detail pet heard begin clean switch guy relevant justice connect cup basket weekly demand square",
  "attention advance diet gear difference correct nation lots piece sheet firm seven species jump",
  "resort facility minister motion fashion monitor forest whose coverage couple chance vision ball",
  "listen discuss accept naked goal successful sold wind clinical situation highly appear",
  "developing lives leather determine temperature palm patient actual historical stone perhaps",
  "difficult scientific satellite fit tests village met particularly coffee buyer cultural easily",
  "edge root ice pink balance graduate shot initial label thinking recommend league minute bus",
  "provider cold manufacturing chair fishing effort phase bag fantasy motor professor context",
  "install shirt generally continued foot mass count breast quickly religion claim permission",
  "surgery patch heat wild generation miss chemical doctor task reduce brought himself nor",
  "component enable exercise guarantee leader soft alone flight fuel walk wait pocket rose freedom",
  "argument competition joint fresh attorney factor growing stream pick hearing eastern therapy",
  "upper serious prime limit began urban essential myself platform load labor immediately defense",
  "heavy recovery comprehensive expert universal protect drop solid presentation became orange",
  "prevent theme rich campaign improvement finding examples spirit challenge seem touch towards",
  "hire election suggest branch serve mount smart gave avoid manage corner rank element birth",
  "requests separate quarter procedure leadership define religious breakfast column faith chain",
  "identify approximately domestic reach comparison mental moment sequence opening lab plastic",
  "produce snow truth counter weekend camp bridge native fill movement baseball approval draft",
  "chart equal adventure profit assistant variable expect parking yesterday workshop gone extension",
  "golden completely funny brother gene pattern boat direction basketball evening nuclear mouse",
  "signal brain powerful dream false cast flower felt personnel soul promote carry flag advantage",
  "maintain priority brief eight iron straight script dining interview mix framework queen clearly",
  "fix handle sweet desk criteria associate truck behavior frequently revenue measure changing duty",
  "bear gain laboratory ocean depth whatever train exactly dry explore concept nearly reality",
  "forgot origin knew billion intelligence bought route broken blow speak partnership expression",
  "speech wire rural tape strategic judge economics acid apartment height speaker obtain designer",
  "remain marriage roll secret negative theater perform healthy lawyer married proposal birthday",
  "toward won slightly assist conduct legislation wear ultimate representative frequency minor",
  "finish mom rare spent extreme row administrator cycle contain rise sleep bird creation scene",
  "hunter lady famous writer chairman drink gender eat permanent practical seat originally",
  "philosophy regulation reduction aim recording junior meaning tip wonderful mine ticket guess",
  "whom ski soccer math presence increasing majority dogs ahead moon participation scheme utility",
  "fly manner combination despite strength proper convention principal daughter standing comfort",
  "kept appeal previously hey beat household tea trees achieve dress dealer contemporary sky nearby",
  "happen hide refer provision clothes certainly indeed newspaper toy layer slow hip nine mostly",
  "spot spend factory grow relative amazing clock identity feeling hidden reasonable relief",
  "influence ratio importance rain onto planet recipe permit proof tennis prescription bedroom",
  "empty instance hole ride specifically represent pair ideal dinner cream yeah discover fourth",
  "aware shape evolution greatest concerned operator cap hers theirs peak competitive exist wheel",
  "salt poetry bell preparation attempt forget accurate climate instruction sister raw explain",
  "establish extent sharp aircraft employer occur percentage knows describe concern heritage",
  "immediate spread coach agricultural expand audience participate specialist cook affect",
  "investigation hat institution cannot bike totally plate indicate thirteen lose organic seek",
  "sixty extremely neighborhood agenda anyway curriculum circle soil anywhere psychology wet",
  "investor identification elementary cooking respond arm keys launch wave holy trail enforcement",
  "symbol highway poll celebrity bond chocolate eaten portion flew scope cotton requirement rode",
  "border ancient debate sang shook pregnancy slept stole swam threw historic woke wore husband",
  "drank concert retirement froze efficiency comedy efficient commitment carrier constant blew",
  "mouth meter reflect pure ridden deliver risen shaken wonder fruit woken reform discovery draw",
  "assume confidence alliance confirm warm neither leaves engineer lifestyle consistent hen replace",
  "objective sugar crew stick relation slide volunteer democratic enhance exact formal contribute",
  "lock storm bowl recognition tank estimate encourage kid territory paint delay pilot goodbye",
  "initiative novel pan disability winner episode examination dish truly painting extensive",
  "universe candidate perspective mirror tournament consideration gray broad chosen rice salary",
  "reservation guard properly saving remaining twenty newly raise prepare depending expansion vary",
  "tomorrow milk decide drama don't doesn't downtown didn't contest isn't aren't wasn't weren't",
  "boot can't couldn't won't absolutely wouldn't shouldn't haven't lunch hasn't hadn't i'm push",
  "chamber i've i'll i'd muscle you're you've you'll implement we're they're he's she's it's",
  "typical that's tower there's yours what's let's significantly chicken temporary attend shower",
  "tonight dear sufficient shell province awareness governor beer contribution measurement tokens",
  "formula solar catch sir earn unable classroom democracy visitor twin forth drawing biological",
  "transition instrument split heaven pregnant twice physician normally spiritual hunting suit",
  "shift chip sit numerous relatively birds satisfaction intellectual carbon spending comfortable",
  "interaction effectively massive bright treat piano revolution earnings mystery landscape",
  "dependent journey cooperation teach rapid pull diversity sensitive concrete technique calculate",
  "anniversary strip resident plot possibly airline typically representation regard smooth",
  "consumption narrow afternoon consultant willing hundred strange mention operate bathroom stable",
  "lesson asset reaction generate humor exception successfully fabric primarily tight contrast",
  "recommendation expensive meant capture plane seed desire mechanism welfare peer caught",
  "eventually driven bottle conclusion thousand meat legend bone inner formation gate settlement",
  "valuable tone ethics forever busy captain imagine leg neck wing taste commit tiny rail liberal",
  "gap tube belt jacket proud instructor giant usual angle ongoing worst era convert possibility",
  "analyst garage exciting unfortunately pleasure honor nurse prayer appointment quiet luck",
  "producer cheese carefully jet maker crack principle appearance craft cake apart fellow blind",
  "strongly familiar capable till pen admission shoe victory sand joy mainly ethnic ran actor finds",
  "fifth citizen absolute substance pipe concentration lay interpretation deck taught worker alive",
  "prove genetic promise thin exhibition prefer cabinet evaluate collect bet composition definitely",
  "existence immigration mutual necessarily attribute skill everyday apparently inquiry exhibit",
  "throw trend visible cats desert obviously worse summit fundamental escape somewhat substantial",
  "glance championship impossible tells obvious fiber judgment tissue explanation folk electricity",
  "arrival okay emphasis aspect awesome lift closer shadow expense venture clinic mall involvement",
  "dad extend subsequent fell yard establishment tourist mayor adequate senator yield pour dust",
  "entirely occupation closely seriously ear elsewhere conservative abroad tie roof demonstrate",
  "atmosphere kiss experiment assignment rush absence cluster whereas surprise everybody glad",
  "medication supposed ordinary nobody ghost stability boss pride institutional independence",
  "reporter champion personally plenty sentence throat ignore uniform wealth tall somewhere",
  "recognize survival publish toe whenever lifetime forgotten athletic vital fairly charity",
  "obligation wake segment realize regardless insight lucky latter thick repeat ease outcome",
  "appreciate lovely smile armed regularly pine tend partly tradition deputy scholarship moral",
  "finger keeps pound locate ourselves bread wooden tough incident lie conversation decrease chest",
  "capability herself solve minority diverse passion sight wise odds legacy widely phrase emotional",
  "leaf versus combine exceed introduce romantic examine sad slowly communicate infant kick meal",
  "hurt unlike pot dimension slip grass achievement funeral passenger silent literary egg",
  "orientation childhood swing talent wisdom boundary elite spin witness powder assess wash",
  "entrance shore loose unusual increasingly routine basically conventional sought habitat",
  "adjustment hero attitude difficulty collective coalition pace besides wage observation feels",
  "coat mrs opposition container defendant recall belief shoulder singer intervention fed invite",
  "suppose involve moderate thirty opposite understood rapidly ban vast odd wrap mood favor",
  "attractive occasion careful arrive moreover aside essay discipline dialogue trace shut mask",
  "photographer inform coal largely announce spoke blade suddenly cookie merely arrangement stretch",
  "furthermore headquarters crowd transformation personality cloud proceed knife shelf adopt",
  "incredible crop twelve founder decade tired everywhere stood sing honest restore somebody sue",
  "reputation hang variation passage photograph juice chase sauce eggs initially eliminate fortune",
  "preference fewer drew translate corn farmer constitutional grew perfectly portrait rat",
  "ultimately equally naturally jury tail lawn soup potentially considerable nose anymore broke",
  "constantly resolve presidential frequent ceiling anybody bunch afford quit distinct lung",
  "highlight brilliant spoken sees grain regime depend differ breath virtually tale psychological",
  "surprised similarly margin commander thinks suggestion brush investigate deer tongue proportion",
  "invest honey significance scenario oven engage testimony crucial celebration viewer laugh pitch",
  "dozen butter pepper chef grocery pie occasionally emission apparent recover prompt essentially",
  "qualify attach approve chose intensity pole constitute desperate demonstration bend sacred",
  "compete lover belong profession tire participant friendship frozen observer drag ceremony",
  "somehow rely stuck adjust sophisticated silence treaty lemon darkness joke respondent satisfy",
  "shelter celebrate mixture bench impressive architect salad preserve poem veteran relax",
  "congressional hardly bean float acquire vessel admit tap analyze relate swim retain tunnel",
  "distribute loud begun cholesterol dramatic scientist nevertheless surely inflation pray radical",
  "flame elderly extraordinary limitation struck construct curious detect knee complicated unlikely",
  "rarely argue arise perception advise survive reveal cow protest assumption cognitive intense",
  "steady publicly incentive heavily fifty uncle reflection sink assure meanwhile brick shortly",
  "cabin innocent consensus intention disagree snap impression refuse tribe rid boom organize alter",
  "advocate confusion arrange artistic bat fallen lip gather colonial slight horizon deeply pursue",
  "overcome grab attract succeed observe racial confident ought transform vegetable bullet",
  "consciousness encounter forty priest notion beneath strengthen defend stolen motivation mere dig",
  "restriction incorporate galaxy worn dominant stomach deny fate literally prospect cite",
  "remarkable pig imagination actress assign lit shade rhythm sudden rope grave legitimate",
  "investigator cigarette characteristic headline narrative enormous consist distinction shake",
  "fence civilian briefly flesh barely bind buck indication surround smell roughly physically",
  "divide deserve worried barrel nerve acknowledge tent dare consequence makeup poet nut sake",
  "prominent lean bye potato onion lawsuit girlfriend courage lap settle hypothesis conclude",
  "propose precisely steal fifteen widespread predict flavor hungry dealt thrown tremendous scholar",
  "accomplish intend bite myth phenomenon eleven differently musician researcher ate gradually",
  "journalist garlic shine opponent distant employ miracle conviction nomination neighbor elect",
  "concentrate climb token tomato pale survivor declare tear stranger nowhere cop adolescent remind",
  "tooth affair drove beside fought helicopter freeze surprising dramatically negotiation heel",
  "gently blanket justify possess defensive missile colleague pose impose telescope knock urge",
  "creature ours cope virtue gentleman spokesman bother resist bent stake absorb accompany activist",
  "adapt admire adviser aide ally anticipate appoint asleep assert athlete bake borrow boyfriend",
  "breathe bury characterize cheek circumstance clue competitor compose confront consume convince",
  "correspondent couch counselor cousin depict derive devote disappear discourse dismiss",
  "distinguish dominate eager economist educate educator embrace emerge emotion emphasize evolve",
  "expectation expose fade gaze gesture gifted glove grandfather grandmother guideline habit",
  "handful historian illustrate immigrant implication imply impress ingredient insist inspire",
  "interpret marry modest negotiate nod nonetheless occupy oppose overlook owe painter pant pause",
  "perceive persuade pile politically politician porch portray pretend prosecutor psychologist",
  "quarterback quietly react recruit refugee regulate reinforce repeatedly resemble retire rifle",
  "rub sanction seize shout shrug sigh slice squeeze stair stare stir supporter surprisingly",
  "sustain swear sweep tablespoon tactic taxpayer teaspoon teenager tendency testify toss troop",
  "undergo voter wander warn wealthy weigh whisper wipe withdraw yell",
];

/** Common English words, lowercase, most frequent first. */
export const VOCAB_WORDS: readonly string[] = WORD_LINES.join(" ").split(" ");

/** GGUF `tokenizer.ggml.token_type` values (llama.cpp's `llama_token_type`). */
export const TokenType = { normal: 1, unknown: 2, control: 3, userDefined: 4, unused: 5, byte: 6 } as const;

/** A tokenizer vocabulary as GGUF stores it: three parallel arrays plus the special ids. */
export interface SpmVocab {
  tokens: string[];
  scores: number[];
  types: number[];
  unkId: number;
  bosId: number;
  eosId: number;
}

/** The SentencePiece word-boundary marker that stands for a space. */
const SPACE = "\u2581";
/** Word endings and clitics, so words outside the list still split into sensible pieces. */
const SUFFIXES = ["'s", "n't", "'re", "'ll", "'ve", "'d", "'m", "s", "es", "ed", "ing", "er", "ly", "est", "tion"];
/** How many of the most frequent words also get a capitalised form early (sentence starts). */
const EARLY_CAPITALS = 300;

/** Endings of words that are rarely verbs: they get no `-ing`/`-ed` forms. */
const NOT_A_VERB = /(tion|sion|ity|ness|ment|al|ful|ous|ive|ly|ic|ist|ism|ance|ence|ship|hood|er|or|ry|ary|ian|ing|ed|s|'.*)$/;

const capitalize = (w: string): string => w.charAt(0).toUpperCase() + w.slice(1);

function plural(w: string): string {
  if (/(s|x|z|ch|sh)$/.test(w)) return `${w}es`;
  if (/[^aeiou]y$/.test(w)) return `${w.slice(0, -1)}ies`;
  return `${w}s`;
}

function withEnding(w: string, ending: "ed" | "ing"): string {
  const stem = w.endsWith("e") ? w.slice(0, -1) : w;
  if (ending === "ed" && /[^aeiou]y$/.test(w)) return `${w.slice(0, -1)}ied`;
  return stem + ending;
}

/**
 * Candidate pieces, best first. Every word comes as `▁word` (a word after a space); later tiers
 * add capitals, inflections and forms without the marker (a word after punctuation).
 */
function* candidates(): Generator<string> {
  const words = VOCAB_WORDS.filter((w) => !w.includes("'") || w.length > 2);
  yield* SUFFIXES;
  for (const [i, w] of words.entries()) {
    yield SPACE + w;
    if (i < EARLY_CAPITALS || w === "hello") yield SPACE + capitalize(w);
  }
  for (const w of words) if (!w.includes("'")) yield SPACE + plural(w);
  for (const [i, w] of words.entries()) if (i >= EARLY_CAPITALS) yield SPACE + capitalize(w);
  for (const w of words) yield w;
  for (const w of words) if (!NOT_A_VERB.test(w)) yield SPACE + withEnding(w, "ing");
  for (const w of words) if (!NOT_A_VERB.test(w)) yield SPACE + withEnding(w, "ed");
  for (const w of words) yield capitalize(w);
  for (const w of words) if (!w.includes("'")) yield SPACE + capitalize(plural(w));
}

/**
 * Builds a vocabulary of exactly `size` tokens: `<unk>`, `<s>`, `</s>`, the extra control tokens,
 * 256 byte-fallback tokens, the printable ASCII characters, then word pieces.
 *
 * llama.cpp's SPM tokenizer only reaches a multi-character token by merging two adjacent tokens
 * whose concatenation is in the vocabulary, so each piece enters together with all its prefixes.
 * Then the piece that starts with `▁` can always absorb its right neighbour inside the word, and a
 * listed word always ends up as one token. Longer pieces score higher, ties go to the more frequent.
 * Unused slots are padded with `<unusedN>` tokens of type UNUSED.
 */
export function buildSpmVocab(size: number, controlTokens: readonly string[] = []): SpmVocab {
  const tokens = ["<unk>", "<s>", "</s>", ...controlTokens];
  const types: number[] = [TokenType.unknown, TokenType.control, TokenType.control, ...controlTokens.map(() => TokenType.control)];
  for (let b = 0; b < 256; b++) {
    tokens.push(`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`);
    types.push(TokenType.byte);
  }
  const fixed = tokens.length;
  const pieces: string[] = [SPACE];
  for (let c = 0x21; c < 0x7f; c++) pieces.push(String.fromCharCode(c));
  if (fixed + pieces.length > size) throw new RangeError(`vocabulary size must be at least ${fixed + pieces.length}`);
  const seen = new Set(pieces);
  for (const piece of candidates()) {
    const missing: string[] = [];
    for (let end = 2; end <= piece.length; end++) {
      const prefix = piece.slice(0, end);
      if (!seen.has(prefix)) missing.push(prefix);
    }
    if (fixed + pieces.length + missing.length > size) break;
    for (const p of missing) { seen.add(p); pieces.push(p); }
  }
  const scores = tokens.map(() => 0);
  pieces.forEach((p, i) => { tokens.push(p); types.push(TokenType.normal); scores.push(p.length - i / pieces.length); });
  for (let n = 0; tokens.length < size; n++) { tokens.push(`<unused${n}>`); types.push(TokenType.unused); scores.push(0); }
  return { tokens, scores, types, unkId: 0, bosId: 1, eosId: 2 };
}

/*
 * @nkzw/safe-word-list — The MIT License (MIT)
 *
 * Copyright (c) 2022 Christoph Nakazawa
 *
 * Permission is hereby granted, free of charge, to any person obtaining a copy of this software and
 * associated documentation files (the "Software"), to deal in the Software without restriction,
 * including without limitation the rights to use, copy, modify, merge, publish, distribute,
 * sublicense, and/or sell copies of the Software, and to permit persons to whom the Software is
 * furnished to do so, subject to the following conditions:
 *
 * The above copyright notice and this permission notice shall be included in all copies or
 * substantial portions of the Software.
 *
 * THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED, INCLUDING BUT
 * NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR PURPOSE AND
 * NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM,
 * DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM, OUT
 * OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE SOFTWARE.
 */

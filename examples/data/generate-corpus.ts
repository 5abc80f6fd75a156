/**
 * Writes examples/data/corpus.txt, the word-count demo's input: synthetic prose from a small hand-written vocabulary
 * plus invented words, drawn with a seeded Zipf-like distribution so a few words are very common and most are rare.
 * The same seed always gives the same bytes.
 *
 * Usage: tsx examples/data/generate-corpus.ts [out-file] [--kb 300] [--seed 2016]
 */
import { writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { SeededRng } from "../../common/rng.js";

const FUNCTION_WORDS = (
  "the of and to a in that is was for on it with as by at from this be or are an not but have had which " +
  "its were one all their there when been has more if will so no would who can each about into than them some"
).split(" ");

const CONTENT_WORDS = (
  "field harvest grain barn tractor farmer season rain soil seed root orchard apple pear plum cherry wheat " +
  "barley oat rye corn bean pea clover hay straw fence gate path river creek pond bridge mill stone wall " +
  "morning evening night noon dawn dusk summer autumn winter spring frost snow wind cloud sun moon star sky " +
  "hill valley meadow forest pine oak birch willow maple hedge furrow plough spade rake basket cart wagon " +
  "horse cow sheep goat hen rooster dog cat mouse owl crow swallow bee wasp ant worm beetle moth " +
  "kitchen bread butter cheese milk honey jam soup kettle stove table chair lamp candle window door roof " +
  "market village town road map letter ledger price coin debt loan trade cart crate sack bushel ton " +
  "neighbour child mother father sister brother uncle aunt grandmother stranger traveller keeper " +
  "quiet slow green golden heavy early late dry wet cold warm bright dark long short tall small wide " +
  "old new ripe bitter sweet sour rough smooth careful patient tired busy steady " +
  "walked carried counted planted gathered stored sold bought mended watched waited listened turned " +
  "opened closed filled emptied measured weighed dried stacked sorted milled baked shared lent " +
  "rises falls grows waits turns keeps brings leaves holds spends saves needs knows remembers forgets"
).split(" ");

const SYLLABLES = "ka lo mi ren sa tu vel dor an ith pel qua rin sol tem bra cor dun fel gar hol".split(" ");

/** The corpus text for `seed`, about `targetBytes` long, lines of at most 72 characters, paragraphs of 3-8 sentences. */
export function generateCorpus(seed: number, targetBytes: number): string {
  const rng = new SeededRng(seed);
  const invented: string[] = [];
  for (let i = 0; i < 2000; i++) {
    const n = 2 + rng.int(3);
    let w = "";
    for (let k = 0; k < n; k++) w += SYLLABLES[rng.int(SYLLABLES.length)]!;
    invented.push(w);
  }
  const vocabulary = [...new Set([...FUNCTION_WORDS, ...CONTENT_WORDS, ...invented])];
  // Zipf weights 1/rank over the vocabulary, sampled by inverting the cumulative sum.
  const cumulative: number[] = [];
  let total = 0;
  for (let r = 1; r <= vocabulary.length; r++) cumulative.push((total += 1 / r));
  const pick = (): string => {
    const x = rng.next() * total;
    let lo = 0;
    let hi = cumulative.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (cumulative[mid]! < x) lo = mid + 1;
      else hi = mid;
    }
    return vocabulary[lo]!;
  };

  const lines: string[] = [];
  let size = 0;
  let line = "";
  const emit = (word: string): void => {
    if (line.length + 1 + word.length > 72) {
      lines.push(line);
      size += line.length + 1;
      line = word;
    } else line = line === "" ? word : `${line} ${word}`;
  };
  while (size < targetBytes) {
    const sentences = 3 + rng.int(6);
    for (let s = 0; s < sentences; s++) {
      const words = 5 + rng.int(14);
      for (let w = 0; w < words; w++) {
        let word = pick();
        if (w === 0) word = word[0]!.toUpperCase() + word.slice(1);
        if (w === words - 1) word += rng.next() < 0.85 ? "." : rng.next() < 0.5 ? "?" : "!";
        else if (rng.next() < 0.08) word += rng.next() < 0.7 ? "," : ";";
        // Now and then a number, so digits are words too.
        if (rng.next() < 0.02) emit(String(1 + rng.int(400)));
        emit(word);
      }
    }
    lines.push(line, "");
    size += line.length + 2;
    line = "";
  }
  return lines.join("\n");
}

function main(): void {
  const args = process.argv.slice(2);
  const flag = (name: string, fallback: number): number => {
    const i = args.indexOf(`--${name}`);
    return i === -1 ? fallback : Number(args.splice(i, 2)[1]);
  };
  const kb = flag("kb", 300);
  const seed = flag("seed", 2016);
  const out = args[0] ?? join(dirname(fileURLToPath(import.meta.url)), "corpus.txt");
  writeFileSync(out, generateCorpus(seed, kb * 1024));
  process.stdout.write(`wrote ${out}\n`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) main();

/** xoshiro128** seeded through splitmix32; byte-for-byte reproducible on every platform. */
export class Xoshiro128 {
    private s0: number;
    private s1: number;
    private s2: number;
    private s3: number;

    constructor(seed: number) {
        let x = seed >>> 0;
        const splitmix = (): number => {
            x = (x + 0x9e3779b9) | 0;
            let z = x;
            z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
            z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
            return (z ^ (z >>> 16)) | 0;
        };
        this.s0 = splitmix();
        this.s1 = splitmix();
        this.s2 = splitmix();
        this.s3 = splitmix();
        if ((this.s0 | this.s1 | this.s2 | this.s3) === 0) this.s0 = 1;
    }

    /** Next uniformly distributed uint32. */
    nextUint32(): number {
        const result = Math.imul(rotl(Math.imul(this.s1, 5), 7), 9) >>> 0;
        const t = this.s1 << 9;
        this.s2 ^= this.s0;
        this.s3 ^= this.s1;
        this.s1 ^= this.s2;
        this.s0 ^= this.s3;
        this.s2 ^= t;
        this.s3 = rotl(this.s3, 11);
        return result;
    }
}

function rotl(x: number, k: number): number {
    return (x << k) | (x >>> (32 - k));
}

/** Uniform float in [0, 1). */
export function nextUnit(rng: Xoshiro128): number {
    return rng.nextUint32() / 0x100000000;
}
